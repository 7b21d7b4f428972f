// Qwen3: no QKV bias; RMSNorm on each head of Q and K before RoPE (NeoX order).
#include "model/architecture.h"

namespace pagoda::model {
const Architecture& qwen3_architecture() {
    static const Architecture a{"qwen3", "Qwen3", kernels::RopeStyle::kNeox, false, true};
    return a;
}
}  // namespace pagoda::model
