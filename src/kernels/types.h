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

// q8_0: GGUF's block_q8_0 per 32 values of a token's row (an fp16 scale, then 32 int8),
// 34 bytes: 0.53x f16's. llama.cpp's `-ctk q8_0 -ctv q8_0`.
// q4_0: GGUF's block_q4_0 per 32 values (an fp16 scale, then 16 bytes of 4-bit values, byte
// j holding value j in its low half and value j + 16 in its high half), 18 bytes: 0.28x
// f16's. llama.cpp's `-ctk q4_0 -ctv q4_0`.
enum class KvDtype { kF32, kF16, kBF16, kQ8_0, kQ4_0 };
// Whether rows are quantized in blocks (q8_0, q4_0): K is kept as V, one row per slot.
inline bool kv_quantized(KvDtype t) { return t == KvDtype::kQ8_0 || t == KvDtype::kQ4_0; }
// Bytes of one element (f32, f16, bf16); a quantized type has none of its own (kv_row_bytes).
size_t kv_dtype_bytes(KvDtype t);
// Bytes of one token's row of head_dim values.
size_t kv_row_bytes(KvDtype t, int head_dim);
inline constexpr int kKvQ8Block = 32;       // values per q8_0 (and q4_0) block
inline constexpr int kKvQ8BlockBytes = 34;  // fp16 scale + 32 int8
inline constexpr int kKvQ4BlockBytes = 18;  // fp16 scale + 32 4-bit values

// One layer of a paged KV cache. Layout per pool: [block][kv_head], then per block and
// head V as [slot][head_dim] and K transposed, [head_dim][slot] (the attention kernel
// scores a query against a run of keys with one vector per dimension). q8_0 and q4_0 keep K
// as V, one quantized row per slot ([slot][row bytes]), its blocks along the head dimension.
struct PagedKv {
    void* k = nullptr;
    void* v = nullptr;
    KvDtype dtype = KvDtype::kF32;
    int block_size = 16;
    int num_kv_heads = 0;
    int head_dim = 0;

    size_t head_stride() const { return size_t(block_size) * size_t(head_dim); }  // elements
    size_t block_stride() const { return head_stride() * size_t(num_kv_heads); }  // elements
    size_t row_bytes() const { return kv_row_bytes(dtype, head_dim); }
    size_t head_bytes() const { return size_t(block_size) * row_bytes(); }
    size_t block_bytes() const { return head_bytes() * size_t(num_kv_heads); }
    // q8_0, q4_0: the row of (block, kv head, slot) in K or V.
    const uint8_t* quant_row(const void* pool, int32_t block, int head, int slot) const {
        return static_cast<const uint8_t*>(pool) + size_t(block) * block_bytes() +
               size_t(head) * head_bytes() + size_t(slot) * row_bytes();
    }
};

// q8_0 rows as GGUF and llama.cpp quantize them: per block d = max|x| / 127 (stored fp16),
// q = round(x / d); a value is fp16(d) * q.
void kv_q8_quantize_row(const float* x, int n, uint8_t* out);
// Value i of a quantized row (q8_0 or q4_0; q4_0 rows are the GGUF weight quantizer's,
// ref::quantize_row: a value is fp16(d) * (q - 8)).
float kv_quant_value(KvDtype t, const uint8_t* row, int i);
// Every KV head's K and V rows of one token (k_row, v_row: [num_kv_heads][head_dim]) into
// slot `slot` of block `block` of a quantized (q8_0, q4_0) layer.
void kv_quant_write(const PagedKv& kv, int32_t block, int slot, const float* k_row,
                    const float* v_row);

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
