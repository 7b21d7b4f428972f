#pragma once
// A Hugging Face model directory's config.json read into what a GGUF file says: the GGUF
// architecture, its hyperparameter keys, and how the checkpoint's tensors are named and
// laid out (Q/K rows to permute for adjacent-pair RoPE, the experts' naming). One entry
// per `architectures[0]` we read; anything else is an error naming the file and field.

#include <string>
#include <vector>

#include "base/result.h"
#include "formats/gguf_writer.h"

namespace pagoda::hf {

enum class ExpertLayout {
    kNone,      // dense: mlp.{gate,up,down}_proj
    kMixtral,   // block_sparse_moe.gate, .experts.E.{w1 (gate), w3 (up), w2 (down)}
    kQwenOlmo,  // mlp.gate, mlp.experts.E.{gate,up,down}_proj
    kGranite,   // block_sparse_moe.router.layer, .input_linear [E, 2F, D], .output_linear
};

struct HfConfig {
    std::string hf_arch;  // architectures[0], e.g. "LlamaForCausalLM"
    std::string arch;     // the GGUF architecture: llama, qwen2, qwen3, qwen3moe, olmoe, ...
    std::string name;     // for general.name
    int layers = 0, dim = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0;
    int vocab = 0, context = 0;
    double rms_eps = 1e-5, rope_theta = 10000.0;
    bool tied = false;
    bool permute_qk = false;  // HF's half-split RoPE rows -> GGUF's adjacent pairs (llama)
    bool qkv_bias = false;    // attention q/k/v biases (Qwen2)
    ExpertLayout experts_layout = ExpertLayout::kNone;
    int experts = 0, experts_used = 0, expert_ffn = 0;
    // rope_scaling: linear factor, or Llama 3's per-frequency factors (rope_freqs.weight).
    std::string rope_scaling = "none";
    double rope_factor = 1.0;
    std::vector<float> rope_freqs;  // [head_dim / 2] or empty
    // Granite's multipliers.
    double embedding_scale = 0, residual_scale = 0, attention_scale = 0, logit_scale = 0;
    int sliding_window = 0;  // Mistral's, recorded (contexts are capped at it on load)

    // Writes general.* and {arch}.* keys.
    void write_metadata(formats::GgufWriter& w) const;
};

// Reads `dir`/config.json. Errors name the file and the field (an unknown architecture
// lists the ones read).
Result<HfConfig> read_hf_config(const std::string& dir);
std::vector<std::string> hf_architectures();

}  // namespace pagoda::hf
