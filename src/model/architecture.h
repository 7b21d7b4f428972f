#pragma once
// Architecture: what distinguishes one Llama-family architecture from another (RoPE
// order, QKV bias, Q/K norm, how a mixture-of-experts router weighs its experts, Granite's
// multipliers). One file per architecture under arch/ defines its entry;
// find_architecture() looks one up by GGUF general.architecture. Whether a model is a
// mixture of experts is read from its file ({arch}.expert_count): Mixtral is "llama" with
// experts.

#include <string>
#include <vector>

#include "kernels/types.h"

namespace pagoda::model {

// Where RMSNorm applies to Q and K before RoPE: not at all, on each head with one
// [head_dim] weight (Qwen3), or on the whole projection with a [q_dim] / [kv_dim] weight
// (OLMoE).
enum class QkNorm { kNone, kPerHead, kWhole };

struct Architecture {
    std::string name;         // general.architecture value
    std::string description;  // for `model info` and errors
    kernels::RopeStyle rope_style = kernels::RopeStyle::kNormal;
    bool qkv_bias = false;  // attn_{q,k,v}.bias present
    QkNorm qk_norm = QkNorm::kNone;
    // Mixture of experts: the router's softmax weights of the top-k experts are divided by
    // their sum (Mixtral, Qwen3-MoE, Granite) or used as they are (OLMoE).
    bool moe_norm_topk = true;
    bool moe_only = false;  // every layer is a mixture (no dense variant of the name)
    // Granite's {arch}.embedding_scale, residual_scale, attention.scale and logit_scale.
    bool granite_scales = false;
};

const Architecture& llama_architecture();
const Architecture& mistral_architecture();
const Architecture& qwen2_architecture();
const Architecture& qwen3_architecture();
const Architecture& qwen3moe_architecture();
const Architecture& olmoe_architecture();
const Architecture& granitemoe_architecture();

// nullptr if unknown.
const Architecture* find_architecture(const std::string& name);
std::vector<std::string> architecture_names();

}  // namespace pagoda::model
