#pragma once
// ModelConfig: hyperparameters of a decoder-only transformer, read from GGUF metadata
// under the architecture's key prefix. Plain value; thread-safe to read.

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "formats/gguf.h"
#include "kernels/types.h"
#include "model/architecture.h"

namespace pagoda::model {

struct ModelConfig {
    std::string arch;  // general.architecture
    std::string name;  // general.name
    int num_layers = 0;
    int dim = 0;  // embedding width
    int num_heads = 0;
    int num_kv_heads = 0;
    int head_dim = 0;  // per head (key_length, default dim / num_heads)
    int ffn_dim = 0;
    int vocab_size = 0;      // rows of token_embd
    int context_length = 0;  // trained context
    float rms_eps = 1e-5f;
    kernels::RopeParams rope;  // freq_factors filled by Weights when present
    std::string rope_scaling = "none";
    bool qkv_bias = false;
    QkNorm qk_norm = QkNorm::kNone;
    // Mixture of experts ({arch}.expert_count > 0): every layer's feed-forward is
    // num_experts SwiGLU experts of expert_ffn_dim, num_experts_used of them per token.
    int num_experts = 0;
    int num_experts_used = 0;
    int expert_ffn_dim = 0;
    bool moe_norm_topk = true;
    // Granite's multipliers (1 and 0 elsewhere: no effect). attention_scale 0 means
    // 1/sqrt(head_dim).
    float embedding_scale = 1.0f, residual_scale = 1.0f, attention_scale = 0.0f;
    float logit_scale = 1.0f;

    bool moe() const { return num_experts > 0; }
    // Parameters per token (experts used) and in all; embeddings counted once.
    int64_t active_params() const;
    int64_t total_params() const;

    int q_dim() const { return num_heads * head_dim; }
    int kv_dim() const { return num_kv_heads * head_dim; }
    Status validate() const;
};

// Reads hyperparameters with `prefix` = the architecture name; the architecture's traits
// (QKV bias, Q/K norm, the router's normalisation) are copied in.
Result<ModelConfig> read_config(const formats::GgufFile& g, const Architecture& arch);

}  // namespace pagoda::model
