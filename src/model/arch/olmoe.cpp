// OLMoE: RMSNorm over the whole Q and K projections (weights of q_dim and kv_dim) before
// NeoX RoPE, and a mixture of SwiGLU experts whose top-k softmax weights are used as they
// are (norm_topk_prob false).
#include "model/architecture.h"

namespace pagoda::model {
const Architecture& olmoe_architecture() {
    static const Architecture a{.name = "olmoe",
                                .description = "OLMoE",
                                .rope_style = kernels::RopeStyle::kNeox,
                                .qk_norm = QkNorm::kWhole,
                                .moe_norm_topk = false,
                                .moe_only = true};
    return a;
}
}  // namespace pagoda::model
