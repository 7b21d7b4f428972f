#pragma once
// The simulated GPU's performance model: what one engine step would take on a named card
// with tensor parallelism, and how vLLM would size its memory there. A roofline per step:
// FLOPs against the card's tensor throughput and bytes (weights / TP, KV read and written)
// against its memory bandwidth, each derated by an efficiency factor, the larger of the two,
// plus two ring all-reduces per layer over the card's interconnect and a fixed per-step
// overhead. The GPU table (src/model/sim/gpus.toml) is compiled in. Pure; thread-safe.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "kernels/types.h"
#include "model/test_model.h"

namespace pagoda::model::sim {

struct Efficiency {
    // memory and step_overhead_ms are fitted to the published vLLM decode step times of
    // src/model/sim/published.toml (A100-40GB and H100 SXM, Llama-3.1-8B: rms error 0.4%,
    // `pagoda sim calibrate`); compute and network are estimates no published row pins yet.
    double compute = 0.5;            // of the tensor-core peak reached by the matmuls
    double memory = 0.77;            // of the memory bandwidth reached by weight and KV streaming
    double network = 0.6;            // of the link bandwidth reached by all-reduce
    double step_overhead_ms = 0.68;  // launch, scheduling, sampling per step
    // How much of the shorter of compute and memory time hides under the longer: 1 on a
    // GPU (a roofline: the step takes the larger), less on a CPU whose threads stream
    // weights and multiply in turn (0: the two add up).
    double overlap = 1.0;
    // Attention's FLOPs run at this share of the matmuls' rate (flash attention on a GPU:
    // about the same; a CPU's attention kernel: far less).
    double attention = 1.0;
    // Host-side work per sequence in a step (scheduling, sampling, detokenising, streaming
    // in the serving engine), which a batch-1 step time barely shows: fitted to vLLM 0.6.0's
    // published loaded-serving figures (`pagoda sim loaded --fit`: 0.13 ms; TPOT within 7%
    // at 4 and 8 req/s on the A100, held-out 70B points within 30%). Measured engine steps
    // (`pagoda sim calibrate`) leave it out: they have no serving API.
    double seq_overhead_ms = 0.13;
    Status validate() const;
};

struct GpuSpec {
    std::string name, description, interconnect, source;
    Efficiency efficiency;  // the table's efficiency_* keys, else the defaults above
    double bf16_tflops = 0, fp8_tflops = 0;  // dense tensor-core peaks
    int64_t memory_mib = 0;
    double memory_tbps = 0;      // TB/s
    double link_gbps = 0;        // GB/s per direction per GPU
    double link_latency_us = 0;  // per ring hop
    int64_t memory_bytes() const { return memory_mib << 20; }
};

// Parses a table like gpus.toml; errors name the origin, the card and the key.
Result<std::vector<GpuSpec>> parse_gpu_table(std::string_view toml, std::string_view origin);
const std::vector<GpuSpec>& builtin_gpus();
// A card of the built-in table, or of `extra_table` (a file like gpus.toml, e.g. one that
// `pagoda sim calibrate` wrote; its cards win). The error lists the known cards.
Result<GpuSpec> find_gpu(const std::string& name, const std::string& extra_table = "");

struct SimShape {
    int layers = 0, dim = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0;
    int64_t vocab = 0;
    bool tied_embeddings = false;
    // A mixture of experts (experts > 0): each layer's feed-forward is `experts` SwiGLU
    // experts of width expert_ffn and a router; a token runs `experts_used` of them.
    int experts = 0, experts_used = 0, expert_ffn = 0;
    int64_t layer_params() const;  // matmul weights of all layers (norms left out)
    // Of those, the ones one token multiplies by (attention, router, its experts): 2 flops
    // each. Equal to layer_params() for a dense model.
    int64_t active_layer_params() const;
    // The layer weights a step of `tokens` tokens reads: every expert that at least one
    // of them routes to, expected over uniform routing: experts (1 - (1 - used/experts)^n).
    // One token reads its active parameters; a large batch, all of them.
    double read_layer_params(int64_t tokens) const;
    int64_t lm_head_params() const;  // vocab x dim
    int64_t total_params() const;    // + lm head, embedding unless tied, RMS norm weights
    static SimShape of(const ModelShape& s);
};

// Weights on the card: bf16/fp16, fp8, or llama.cpp's Q8_0 / Q4_0 blocks (8.5 and 4.5 bits a
// weight; their matmuls run at the bf16 rate).
enum class WeightType { kBf16, kFp8, kQ8_0, kQ4_0 };
Result<WeightType> parse_weight_type(const std::string& s);

// One sequence's part of a step: `new_tokens` computed after `context` cached ones.
struct SeqWork {
    int new_tokens = 1;
    int64_t context = 0;
    bool logits = true;  // it samples this step (the last chunk of a prefill, or a decode)
};

struct StepCost {
    double flops = 0;          // all GPUs
    double bytes_per_gpu = 0;  // weights / TP + KV read and written
    double comm_bytes = 0;     // all-reduce payload per GPU
    double compute_s = 0, memory_s = 0, comm_s = 0, overhead_s = 0;
    double total_s = 0;  // max(compute, memory) + (1 - overlap) min(...) + comm + overhead
                         // (the step's, and each sequence's)
};

// Per GPU, as vLLM sizes it: the budget is memory x gpu_memory_utilization; weights,
// the activation peak of a max_num_batched_tokens forward pass and non-torch memory (CUDA
// context, NCCL buffers) come off it; the rest is KV cache.
struct MemoryPlan {
    int64_t total = 0, budget = 0, weights = 0, activation = 0, non_torch = 0, kv = 0;
    int64_t kv_bytes_per_token = 0;  // on one GPU
    int64_t num_blocks(int block_size) const;
};

class PerfModel {
  public:
    // Errors: TP that does not divide the attention heads (or the KV heads, unless it is a
    // multiple of them: vLLM then replicates KV heads), bad efficiency factors.
    static Result<PerfModel> create(const GpuSpec& gpu, const SimShape& shape, int tp, WeightType w,
                                    kernels::KvDtype kv, const Efficiency& eff);
    StepCost step(const std::vector<SeqWork>& batch) const;
    // Error when the weights and workspace do not fit: says how much is needed and how much
    // there is.
    Result<MemoryPlan> memory(double gpu_memory_utilization, int max_num_batched_tokens) const;

    static constexpr int64_t kNonTorchBytes = int64_t(512) << 20;  // + 256 MiB NCCL if TP > 1
    const GpuSpec& gpu() const { return gpu_; }
    const SimShape& shape() const { return shape_; }
    int tp() const { return tp_; }
    int kv_heads_per_gpu() const;
    double weight_bytes_per_param() const;
    double peak_flops() const;  // per GPU, for the weight type

  private:
    PerfModel() = default;
    GpuSpec gpu_;
    SimShape shape_;
    int tp_ = 1;
    WeightType w_ = WeightType::kBf16;
    kernels::KvDtype kv_ = kernels::KvDtype::kBF16;
    Efficiency eff_;
};

}  // namespace pagoda::model::sim
