#pragma once
// Weights: views of every tensor of a decoder model inside the mmap'ed GGUF file, plus
// the packed copies the fast kernels need (oneDNN layouts for dense types). Built once
// at load, read-only afterwards: safe to use from the compute pool.

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "formats/gguf.h"
#include "kernels/cpu/ops.h"
#include "kernels/types.h"
#include "model/architecture.h"
#include "model/config.h"
#include "model/weight_cache.h"

namespace pagoda::model {

// y = W x (+ b). `view` always points into the file; `dense` (F32/F16/BF16) or `quant`
// (Q8_0/Q4_0) holds the packed copy the fast kernels read.
struct Linear {
    std::string name;  // the tensor's name without ".weight" ("blk.0.attn_qkv" when fused)
    kernels::WeightView view;
    std::unique_ptr<kernels::cpu::DenseMatmul> dense;
    std::unique_ptr<kernels::cpu::QuantMatmul> quant;  // Q8_0/Q4_0, K-quants with VNNI
    std::vector<float> bias;                           // empty when the layer has none

    // y[m][rows] = x[m][cols] W^T + b, with the fast kernels.
    void forward(const float* x, int m, float* y) const;
    bool packed() const { return dense || quant; }
};

// One expert of a mixture: views of its slices of the layer's 3-D tensors
// (ffn_{gate,up,down}_exps), gate and up packed together like a dense layer's.
struct Expert {
    Linear gate, up, down;  // [expert_ffn x dim] x2, [dim x expert_ffn]
    Linear gate_up;         // [2 expert_ffn x dim] packed, or unset
};

struct LayerWeights {
    std::vector<float> attn_norm;  // [dim]
    // wq/wk/wv/w_gate/w_up keep their views (the reference reads them); when their types
    // match, the fast path uses the fused copies below instead (one matmul, one pass
    // over the weights' rows, fewer thread barriers), as vLLM's QKV/merged linears do.
    Linear wq, wk, wv, wo;              // [q_dim x dim], [kv_dim x dim] x2, [dim x q_dim]
    Linear qkv;                         // [(q_dim + 2 kv_dim) x dim] packed, or unset
    Linear gate_up;                     // [2 ffn x dim] packed, or unset
    std::vector<float> q_norm, k_norm;  // [head_dim] (per head), [q_dim]/[kv_dim] (whole)
    std::vector<float> ffn_norm;        // [dim]
    Linear w_gate, w_up, w_down;        // [ffn x dim] x2, [dim x ffn]; unset with experts
    Linear router;                      // ffn_gate_inp [num_experts x dim], experts only
    std::vector<Expert> experts;        // empty for a dense layer
};

// A weight cache for Weights::load: matrices whose packed bytes `in` holds are adopted
// from it instead of packed; with `record`, every matrix packed here is listed in `out`
// (its bytes stay owned by the Weights) for writing a new cache file.
struct PackCache {
    const WeightCache* in = nullptr;
    bool record = false;
    std::vector<PackedPiece> out;
    int adopted = 0, packed = 0;  // matrices taken from `in`, and packed here
};

struct Weights {
    kernels::WeightView token_embd;  // [vocab x dim], any supported type
    std::vector<float> output_norm;  // [dim]
    Linear output;                   // [vocab x dim]; token_embd when tied
    bool tied_embeddings = false;
    std::vector<float> rope_freqs;  // [rot_dim/2] or empty
    std::vector<LayerWeights> layers;
    size_t file_bytes = 0;    // tensor bytes in the file
    size_t packed_bytes = 0;  // extra bytes of packed copies

    enum class Pack { kYes, kNo };  // kNo: views only (reference forward, `model info`)
    static Result<Weights> load(const formats::GgufFile& g, const Architecture& arch,
                                ModelConfig& cfg, Pack pack, PackCache* cache = nullptr);
};

// Supported weight types for compute, and whether a type is dense (oneDNN) or block-quantized.
bool is_supported_weight_type(formats::TensorType t);

}  // namespace pagoda::model
