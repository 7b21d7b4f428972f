// Llama (Llama 2/3, TinyLlama, SmolLM; Mixtral when the file has experts): RMSNorm,
// SwiGLU (or a mixture of SwiGLU experts, top-k of a softmax router, renormalised), GQA,
// RoPE on adjacent pairs (GGUF converters permute Q/K rows into that order), optional
// tied embeddings.
#include "model/architecture.h"

namespace pagoda::model {
const Architecture& llama_architecture() {
    static const Architecture a{.name = "llama",
                                .description = "Llama 2/3, TinyLlama, SmolLM, Mixtral (experts)",
                                .rope_style = kernels::RopeStyle::kNormal};
    return a;
}
}  // namespace pagoda::model
