#pragma once
// ModelConfig: hyperparameters of a decoder-only transformer, read from GGUF metadata
// under the architecture's key prefix. Plain value; thread-safe to read.

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "formats/gguf.h"
#include "kernels/types.h"

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
    bool qk_norm = false;

    int q_dim() const { return num_heads * head_dim; }
    int kv_dim() const { return num_kv_heads * head_dim; }
    Status validate() const;
};

// Reads hyperparameters with `prefix` = the architecture name.
Result<ModelConfig> read_config(const formats::GgufFile& g, const std::string& prefix);

}  // namespace pagoda::model
