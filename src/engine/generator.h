#pragma once
// Generator: one sequence at a time over the paged KV cache (prefill in chunks, then
// decode), for `pagoda generate` and tests. The continuous-batching engine builds on the
// same Model/KvPool contract. Not thread-safe; owns its KV pool.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/sampler.h"
#include "kvcache/kv_pool.h"
#include "model/model.h"

namespace pagoda::engine {

struct GenerateParams {
    int max_new_tokens = 32;
    SamplingParams sampling;
    enum class StopAtEos { kYes, kNo } stop_at_eos = StopAtEos::kYes;
    int prefill_chunk = 512;  // prompt tokens per forward call
};

struct GenerateResult {
    std::vector<int32_t> prompt_ids;
    std::vector<int32_t> output_ids;
    std::string finish_reason;  // "length" or "stop"
    double prefill_seconds = 0.0;
    double decode_seconds = 0.0;
};

class Generator {
  public:
    static Result<Generator> create(model::Model& m, const kvcache::KvCacheConfig& kv);

    // `on_token(id)` is called for each generated token as soon as it is sampled.
    Result<GenerateResult> generate(const std::vector<int32_t>& prompt, const GenerateParams& p,
                                    const std::function<void(int32_t)>& on_token = {});
    const kvcache::KvPool& pool() const { return *pool_; }

  private:
    Generator() = default;
    Status ensure_blocks(int num_tokens);

    model::Model* model_ = nullptr;
    std::unique_ptr<kvcache::KvPool> pool_;
    std::unique_ptr<kvcache::BlockAllocator> alloc_;
    kvcache::BlockTable table_;
};

}  // namespace pagoda::engine
