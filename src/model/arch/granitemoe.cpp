// Granite MoE (IBM Granite 3.x MoE): the Llama block with a mixture of SwiGLU experts
// (top-k renormalised) and four multipliers: embeddings times embedding_scale, each
// block's output times residual_scale before the residual add, attention.scale in place
// of 1/sqrt(head_dim), and logits divided by logit_scale.
#include "model/architecture.h"

namespace pagoda::model {
const Architecture& granitemoe_architecture() {
    static const Architecture a{.name = "granitemoe",
                                .description = "Granite MoE",
                                .rope_style = kernels::RopeStyle::kNormal,
                                .moe_only = true,
                                .granite_scales = true};
    return a;
}
}  // namespace pagoda::model
