// Llama (Llama 2/3, TinyLlama, SmolLM): RMSNorm, SwiGLU, GQA, RoPE on adjacent pairs
// (GGUF converters permute Q/K rows into that order), optional tied embeddings.
#include "model/architecture.h"

namespace pagoda::model {
const Architecture& llama_architecture() {
    static const Architecture a{"llama", "Llama 2/3, TinyLlama, SmolLM",
                                kernels::RopeStyle::kNormal, false, false};
    return a;
}
}  // namespace pagoda::model
