// Qwen2 / Qwen2.5: the Llama block with biases on Q, K and V, and NeoX-order RoPE.
#include "model/architecture.h"

namespace pagoda::model {
const Architecture& qwen2_architecture() {
    static const Architecture a{"qwen2", "Qwen2, Qwen2.5", kernels::RopeStyle::kNeox, true, false};
    return a;
}
}  // namespace pagoda::model
