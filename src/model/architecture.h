#pragma once
// Architecture: what distinguishes one Llama-family architecture from another (RoPE
// order, QKV bias, per-head Q/K norm). One file per architecture under arch/ defines
// its entry; find_architecture() looks one up by GGUF general.architecture.

#include <string>
#include <vector>

#include "kernels/types.h"

namespace pagoda::model {

struct Architecture {
    std::string name;         // general.architecture value
    std::string description;  // for `model info` and errors
    kernels::RopeStyle rope_style = kernels::RopeStyle::kNormal;
    bool qkv_bias = false;  // attn_{q,k,v}.bias present
    bool qk_norm = false;   // attn_{q,k}_norm.weight per head
};

const Architecture& llama_architecture();
const Architecture& mistral_architecture();
const Architecture& qwen2_architecture();
const Architecture& qwen3_architecture();

// nullptr if unknown.
const Architecture* find_architecture(const std::string& name);
std::vector<std::string> architecture_names();

}  // namespace pagoda::model
