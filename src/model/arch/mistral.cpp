// Mistral: the Llama block as written by converters that name the architecture
// "mistral". Sliding-window attention is not applied: contexts are capped at the window.
#include "model/architecture.h"

namespace pagoda::model {
const Architecture& mistral_architecture() {
    static const Architecture a{.name = "mistral",
                                .description = "Mistral (Llama block)",
                                .rope_style = kernels::RopeStyle::kNormal};
    return a;
}
}  // namespace pagoda::model
