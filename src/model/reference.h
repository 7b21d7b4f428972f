#pragma once
// A contiguous, scalar reference forward pass (llama2.c style): one sequence, a plain
// [layer][pos][kv_dim] cache, kernels/ref only. Slow; exists so the paged, batched,
// SIMD forward() can be tested against something obviously right. Thread-compatible.

#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"

namespace pagoda::model {

// Logits for every position of `tokens`: result[t] has vocab_size floats.
std::vector<std::vector<float>> reference_forward(const Model& m, std::span<const int32_t> tokens);

}  // namespace pagoda::model
