// Qwen3: no QKV bias; RMSNorm on each head of Q and K before RoPE (NeoX order).
#include "model/architecture.h"

namespace pagoda::model {
const Architecture& qwen3_architecture() {
    static const Architecture a{.name = "qwen3",
                                .description = "Qwen3",
                                .rope_style = kernels::RopeStyle::kNeox,
                                .qk_norm = QkNorm::kPerHead};
    return a;
}
}  // namespace pagoda::model
