// Qwen3-MoE: the Qwen3 block (per-head Q/K RMSNorm, NeoX RoPE, no QKV bias) with every
// feed-forward a mixture of SwiGLU experts: softmax router, top-k renormalised
// (norm_topk_prob), no shared expert.
#include "model/architecture.h"

namespace pagoda::model {
const Architecture& qwen3moe_architecture() {
    static const Architecture a{.name = "qwen3moe",
                                .description = "Qwen3-MoE (Qwen3-30B-A3B)",
                                .rope_style = kernels::RopeStyle::kNeox,
                                .qk_norm = QkNorm::kPerHead,
                                .moe_only = true};
    return a;
}
}  // namespace pagoda::model
