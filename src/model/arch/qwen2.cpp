// Qwen2 / Qwen2.5: the Llama block with biases on Q, K and V, and NeoX-order RoPE.
#include "model/architecture.h"

namespace pagoda::model {
const Architecture& qwen2_architecture() {
    static const Architecture a{.name = "qwen2",
                                .description = "Qwen2, Qwen2.5",
                                .rope_style = kernels::RopeStyle::kNeox,
                                .qkv_bias = true};
    return a;
}
}  // namespace pagoda::model
