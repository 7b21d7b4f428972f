#pragma once
// Model: a loaded Llama-family decoder (config, weights, tokenizer) and its paged forward
// pass. load() maps the file and validates everything; forward() is called by one thread
// at a time (the engine thread) and uses the compute pool inside.

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/mapped_file.h"
#include "base/result.h"
#include "formats/gguf.h"
#include "hf/hf_convert.h"
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
    // Packed weights are read from and written to a cache file in this folder
    // (weight_cache.h): a start with a warm cache maps them instead of packing. Empty: off.
    std::string weight_cache_dir;
    WeightCache::Use weight_cache_use = WeightCache::Use::kAuto;
    // A Hugging Face directory (config.json, *.safetensors, tokenizer.json) is converted
    // once to a GGUF file in this folder (empty: hf::default_cache_dir()), then loaded.
    std::string hf_cache_dir;
    hf::ConvertOptions hf;  // matrix type (--quantization), --tokenizer, generation config
};

// Sampling defaults a model ships (a Hugging Face directory's generation_config.json, kept
// as pagoda.generation.* keys by the conversion): applied to requests that do not set the
// field, as vLLM's --generation-config auto does. Unset fields keep the server's defaults.
struct GenerationDefaults {
    std::optional<float> temperature, top_p, min_p, repetition_penalty;
    std::optional<int> top_k;
    bool any() const { return temperature || top_p || min_p || repetition_penalty || top_k; }
};

// What the weight cache did at load.
struct WeightCacheReport {
    enum class State { kOff, kHit, kWriting, kWritten, kFailed };
    State state = State::kOff;
    std::string path;
    std::string note;  // why the cache was not used (missing, stale, damaged), or the error
    int adopted = 0, packed = 0;  // matrices mapped from the cache, and packed at load
    bool copied = false;          // hit, but copied out of 4 KiB pages into huge pages
};
const char* weight_cache_state_name(WeightCacheReport::State s);

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

// Faults injected into a simulated model (POST /admin/faults on `pagoda serve --backend
// sim`), so rehearsals and tests drive real alert and failover paths.
struct SimFaults {
    double memory_pressure = 0;       // modelled memory reported at least this share (0: off)
    double slow_factor = 1;           // every step takes this many times its modelled time
    double error_rate = 0;            // share of new generation requests answered 500
    int64_t crash_after_tokens = -1;  // the process is killed after this many more generated
                                      // tokens (-1: never)
};

// A mixture's router: out[T][experts] = the logits of each of T rows of h (width D). A row's
// logits are the same bits at every T, so its experts do not depend on the rest of the batch
// (decode, prefill and a speculative verify route one row alike).
void router_logits(const Linear& router, const float* h, int T, int D, float* out);

class Model {
  public:
    static Result<std::unique_ptr<Model>> load(const std::string& path, LoadOptions opts = {});
    ~Model();  // waits for a weight cache file being written
    // A simulated model (model_sim.cpp). Its config() is one GPU's shard: heads and KV heads
    // divided by the TP degree (KV heads at least 1), so the KV pool is sized per GPU.
    static Result<std::unique_ptr<Model>> simulate(const SimOptions& o);
    bool simulated() const { return sim_ != nullptr; }
    const sim::PerfModel* perf_model() const { return sim_ ? &sim_->perf : nullptr; }
    SimTotals sim_totals() const;  // thread-safe
    double sim_speed() const { return sim_ ? sim_->opts.speed : 1.0; }
    // Thread-safe; sim only (kUnsupported on a real model). Values are checked.
    Status set_sim_faults(const SimFaults& f) const;
    SimFaults sim_faults() const;

    // Runs the batch: writes K/V for every row through `kv`, returns logits for
    // batch.logits_rows into `logits` ([rows][vocab_size], resized here). With
    // `device_tokens`, a backend that samples on its device (the simulated GPU) writes one
    // token per logits row there, the row's argmax, and leaves the logits of rows marked in
    // batch.greedy_rows unwritten; the CPU backend leaves it empty (the host samples).
    Status forward(const ForwardBatch& batch, const kvcache::KvView& kv, std::vector<float>& logits,
                   std::vector<int32_t>* device_tokens = nullptr);

    // Warmup: creates the matmul primitives for every batch bucket up to max_tokens rows
    // (logits rows up to max_logits_rows), so no request pays for their creation.
    // Returns how many (matrix, bucket) pairs were prepared.
    int prepare_kernels(int max_tokens, int max_logits_rows);

    const ModelConfig& config() const { return cfg_; }
    const Weights& weights() const { return weights_; }
    const Architecture& architecture() const { return *arch_; }
    const GenerationDefaults& generation_defaults() const { return gen_defaults_; }
    const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
    const formats::GgufFile& gguf() const { return *gguf_; }
    const MappedFile& file() const { return file_; }
    // Thread-safe; state kWriting turns kWritten (or kFailed) when the file is complete.
    WeightCacheReport weight_cache_report() const;
    // Blocks until a weight cache file being written is complete (tests, `pagoda generate`).
    void wait_weight_cache() const;

  private:
    Model() = default;
    // load() and prepare_kernels() run these on a thread of their own (see model.cpp).
    static Result<std::unique_ptr<Model>> load_on_this_thread(const std::string& path,
                                                              LoadOptions opts);
    int prepare_kernels_on_this_thread(int max_tokens, int max_logits_rows);
    void embed(const ForwardBatch& b, float* x) const;
    // forward()'s parts: scratch sized for T rows; each row's position and sequence; one
    // layer's attention block (norm, QKV, RoPE, K/V into the cache, attention, output
    // projection, residual, FFN norm) and its SwiGLU feed-forward block with the residual.
    struct Rows;
    void grow_scratch(int T);
    static Rows rows_of(const ForwardBatch& b);
    void attention_block(const ForwardBatch& b, const LayerWeights& L, const kernels::PagedKv& pkv,
                         const Rows& rows);
    void ffn_block(const LayerWeights& L, int T);
    void moe_block(const LayerWeights& L, int T);
    Status sim_forward(const ForwardBatch& b, std::vector<float>& logits,
                       std::vector<int32_t>* device_tokens);
    Status check_batch(const ForwardBatch& b, int block_size) const;
    // Opens the cache for `opts` (if any) and loads the weights through it; starts the
    // writer of a new cache file when anything was packed.
    Status load_weights(const std::string& path, const LoadOptions& opts);

    MappedFile file_;
    std::unique_ptr<formats::GgufFile> gguf_;
    const Architecture* arch_ = nullptr;
    ModelConfig cfg_;
    GenerationDefaults gen_defaults_;
    Weights weights_;
    std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
    std::unique_ptr<WeightCache> weight_cache_;  // mapped: the adopted weights point into it
    mutable std::mutex cache_mu_;
    WeightCacheReport cache_report_;  // guarded by cache_mu_
    mutable std::thread cache_writer_;

    struct Sim {
        sim::PerfModel perf;
        SimOptions opts;
        std::vector<int32_t> plain_tokens;  // what generated tokens are drawn from
        std::vector<sim::SeqWork> work;     // sim_forward's scratch (the forward's thread only)
        mutable std::mutex mu;
        SimTotals totals;  // guarded by mu
        SimFaults faults;  // guarded by mu
    };
    std::unique_ptr<Sim> sim_;

    // Scratch reused across steps ("RunState"); only forward() touches these.
    struct Scratch {
        std::vector<float> x, h, q, k, v, att, o, gate, up, fused;
        // Mixture of experts: router probabilities, and one expert's gathered rows in/out.
        std::vector<float> probs, xe, ye;
        std::vector<std::vector<std::pair<int, float>>> routed;  // expert -> (row, weight)
    } s_;
};

// Opens and parses a GGUF file, keeping the mapping alive alongside.
struct OpenedGguf {
    MappedFile file;
    std::unique_ptr<formats::GgufFile> gguf;
};
Result<OpenedGguf> open_gguf(const std::string& path);

}  // namespace pagoda::model
