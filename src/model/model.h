#pragma once
// Model: a loaded Llama-family decoder (config, weights, tokenizer) and its paged forward
// pass. load() maps the file and validates everything; forward() is called by one thread
// at a time (the engine thread) and uses the compute pool inside.

#include <memory>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "base/result.h"
#include "formats/gguf.h"
#include "kvcache/kv_pool.h"
#include "model/architecture.h"
#include "model/config.h"
#include "model/forward_batch.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::model {

struct LoadOptions {
    Weights::Pack pack = Weights::Pack::kYes;
};

class Model {
  public:
    static Result<std::unique_ptr<Model>> load(const std::string& path, LoadOptions opts = {});

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
    Status check_batch(const ForwardBatch& b, int block_size) const;

    MappedFile file_;
    std::unique_ptr<formats::GgufFile> gguf_;
    const Architecture* arch_ = nullptr;
    ModelConfig cfg_;
    Weights weights_;
    std::unique_ptr<tokenizer::Tokenizer> tokenizer_;

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
