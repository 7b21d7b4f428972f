#pragma once
// Model: a loaded Llama-family decoder (config, weights, tokenizer) and its paged forward
// pass. load() maps the file and validates everything; forward() is called by one thread
// at a time (the engine thread) and uses the compute pool inside.

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "base/result.h"
#include "formats/gguf.h"
#include "kvcache/kv_pool.h"
#include "model/architecture.h"
#include "model/config.h"
#include "model/forward_batch.h"
#include "model/sim/perf_model.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::model {

struct LoadOptions {
    Weights::Pack pack = Weights::Pack::kYes;
};

// The simulated GPU (`pagoda serve --backend sim`): no weights; forward() waits the step
// time the performance model gives for the batch on `gpu` with tensor parallelism `tp`
// (divided by `speed`), writes no KV, and returns logits that pick a token from the
// vocabulary by a seeded hash of (token, position), so greedy output is deterministic and
// independent of the batch; EOS comes with `eos_probability` per token.
struct SimOptions {
    std::string model;       // a known shape name, or a GGUF file (its shape and tokenizer)
    std::string vocab_path;  // tokenizer for a shape name (a GGUF file)
    sim::GpuSpec gpu;
    int tp = 1;
    sim::WeightType weights = sim::WeightType::kBf16;
    kernels::KvDtype kv_dtype = kernels::KvDtype::kBF16;
    sim::Efficiency efficiency;
    double speed = 1.0;  // modelled durations are divided by this
    double eos_probability = 0.0;
    uint64_t seed = 0;
};

// What the simulated GPU has done so far (modelled time, not wall time).
struct SimTotals {
    int64_t steps = 0;
    double busy_s = 0, compute_s = 0, memory_s = 0, comm_s = 0;
    double flops = 0, bytes = 0, comm_bytes = 0;
};

class Model {
  public:
    static Result<std::unique_ptr<Model>> load(const std::string& path, LoadOptions opts = {});
    // A simulated model (model_sim.cpp). Its config() is one GPU's shard: heads and KV heads
    // divided by the TP degree (KV heads at least 1), so the KV pool is sized per GPU.
    static Result<std::unique_ptr<Model>> simulate(const SimOptions& o);
    bool simulated() const { return sim_ != nullptr; }
    const sim::PerfModel* perf_model() const { return sim_ ? &sim_->perf : nullptr; }
    SimTotals sim_totals() const;  // thread-safe
    double sim_speed() const { return sim_ ? sim_->opts.speed : 1.0; }

    // Runs the batch: writes K/V for every row through `kv`, returns logits for
    // batch.logits_rows into `logits` ([rows][vocab_size], resized here).
    Status forward(const ForwardBatch& batch, const kvcache::KvView& kv,
                   std::vector<float>& logits);

    // Warmup: creates the matmul primitives for every batch bucket up to max_tokens rows
    // (logits rows up to max_logits_rows), so no request pays for their creation.
    // Returns how many (matrix, bucket) pairs were prepared.
    int prepare_kernels(int max_tokens, int max_logits_rows);

    const ModelConfig& config() const { return cfg_; }
    const Weights& weights() const { return weights_; }
    const Architecture& architecture() const { return *arch_; }
    const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
    const formats::GgufFile& gguf() const { return *gguf_; }
    const MappedFile& file() const { return file_; }

  private:
    Model() = default;
    // load() and prepare_kernels() run these on a thread of their own (see model.cpp).
    static Result<std::unique_ptr<Model>> load_on_this_thread(const std::string& path,
                                                              LoadOptions opts);
    int prepare_kernels_on_this_thread(int max_tokens, int max_logits_rows);
    void embed(const ForwardBatch& b, float* x) const;
    Status sim_forward(const ForwardBatch& b, std::vector<float>& logits);
    Status check_batch(const ForwardBatch& b, int block_size) const;

    MappedFile file_;
    std::unique_ptr<formats::GgufFile> gguf_;
    const Architecture* arch_ = nullptr;
    ModelConfig cfg_;
    Weights weights_;
    std::unique_ptr<tokenizer::Tokenizer> tokenizer_;

    struct Sim {
        sim::PerfModel perf;
        SimOptions opts;
        std::vector<int32_t> plain_tokens;  // what generated tokens are drawn from
        mutable std::mutex mu;
        SimTotals totals;  // guarded by mu
    };
    std::unique_ptr<Sim> sim_;

    // Scratch reused across steps ("RunState"); only forward() touches these.
    struct Scratch {
        std::vector<float> x, h, q, k, v, att, o, gate, up, fused;
    } s_;
};

// Opens and parses a GGUF file, keeping the mapping alive alongside.
struct OpenedGguf {
    MappedFile file;
    std::unique_ptr<formats::GgufFile> gguf;
};
Result<OpenedGguf> open_gguf(const std::string& path);

}  // namespace pagoda::model
