#pragma once
// Random-weight GGUF models with the exact shapes of named real models, for speed and
// memory work (never for quality), and small GQA models for tests. Weights are scaled
// so activations stay finite through every layer. The tokenizer is copied from a vocab
// GGUF and padded with unused tokens up to the shape's vocabulary size.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "formats/gguf.h"
#include "formats/tensor_type.h"

namespace pagoda::model {

struct ModelShape {
    std::string name;
    std::string arch;  // an architecture name (model/architecture.h)
    int num_layers, dim, num_heads, num_kv_heads, ffn_dim, vocab_size, context_length;
    float rope_base;
    bool tied_embeddings;
    // A mixture of experts: experts, used per token, each expert's width (ffn_dim is then
    // written as feed_forward_length, as converters do). Zero: dense.
    int num_experts = 0, num_experts_used = 0, expert_ffn_dim = 0;
    int head_dim = 0;  // 0: dim / num_heads
};

const std::vector<ModelShape>& known_shapes();
Result<ModelShape> find_shape(const std::string& name);

struct TestModelOptions {
    ModelShape shape;
    formats::TensorType dtype = formats::TensorType::kF32;  // matrices; norms stay F32
    uint64_t seed = 1;
    std::string vocab_path;  // GGUF file to copy tokenizer.* keys from
    std::string output_path;
};

// Writes the model; `progress(done_bytes, total_bytes)` may be empty.
Status write_test_model(const TestModelOptions& opts,
                        const std::function<void(size_t, size_t)>& progress = {});

// Writes `src` (an F32 llama model) zero-padded to a wider shape that computes the same
// function: dim and ffn grow (more heads, the same GQA ratio), new rows and columns are
// zero, norm weights and eps are rescaled for the wider RMS. Makes a trained model whose
// matrices llama-quantize can write as K-quants (rows of multiples of 256) from the
// bundled 64-wide one. head_dim (0: the model's) widens each head with zero dimensions
// (the queries scaled by sqrt(head_dim / the model's) for the attention's 1/sqrt(head_dim),
// RoPE kept on the model's dimensions): a trained model with a real model's head size.
Status write_padded_model(const std::string& src_path, int dim, int ffn_dim,
                          const std::string& output_path, int head_dim = 0);

}  // namespace pagoda::model
