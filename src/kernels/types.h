#pragma once
// Views the kernels compute on: a 2-D weight in a GGUF tensor type, and a paged KV
// layer. Plain structs over memory someone else owns; no allocation, thread-safe to read.

#include <cstddef>
#include <cstdint>

#include "formats/tensor_type.h"

namespace pagoda::kernels {

using formats::TensorType;

// W is [rows][cols] in ggml order: row r holds `cols` contiguous (possibly block-quantized)
// elements; y = W x means y[r] = sum_c W[r][c] * x[c].
struct WeightView {
    TensorType type = TensorType::kF32;
    int64_t rows = 0;
    int64_t cols = 0;
    const uint8_t* data = nullptr;

    size_t row_bytes() const;
    const uint8_t* row(int64_t r) const { return data + size_t(r) * row_bytes(); }
};

enum class KvDtype { kF32, kF16, kBF16 };
size_t kv_dtype_bytes(KvDtype t);

// One layer of a paged KV cache. Layout per pool: [block][kv_head], then per block and
// head V as [slot][head_dim] and K transposed, [head_dim][slot] (the attention kernel
// scores a query against a run of keys with one vector per dimension).
struct PagedKv {
    void* k = nullptr;
    void* v = nullptr;
    KvDtype dtype = KvDtype::kF32;
    int block_size = 16;
    int num_kv_heads = 0;
    int head_dim = 0;

    size_t head_stride() const { return size_t(block_size) * size_t(head_dim); }  // elements
    size_t block_stride() const { return head_stride() * size_t(num_kv_heads); }  // elements
};

// Queries of one sequence against its cached keys. Query row i sits at position
// q_pos0 + i and attends (causally) to keys at positions 0 .. q_pos0 + i.
struct AttentionSeq {
    const int32_t* block_table = nullptr;  // block ids covering positions 0 .. q_pos0 + num_q - 1
    int num_q = 0;
    int q_pos0 = 0;
};

struct AttentionShape {
    int num_heads = 0;   // query heads; num_heads % kv.num_kv_heads == 0 (GQA)
    float scale = 1.0f;  // usually 1/sqrt(head_dim)
    int q_stride = 0;    // floats between query rows
    int out_stride = 0;  // floats between output rows
};

enum class RopeStyle { kNormal, kNeox };  // adjacent pairs (GGUF llama) or half-split (NeoX)

struct RopeParams {
    RopeStyle style = RopeStyle::kNormal;
    int rot_dim = 0;  // leading dims of each head that rotate
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;              // linear scaling: positions multiplied by this
    const float* freq_factors = nullptr;  // optional [rot_dim/2] divisors (Llama 3.1 rope_freqs)
};

}  // namespace pagoda::kernels
