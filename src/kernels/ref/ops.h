#pragma once
// Reference kernels: scalar, obviously right, slow. Every optimised kernel in cpu/ has
// the same signature and is tested against these. Thread-safe (no shared state).

#include <cstdint>

#include "kernels/types.h"

namespace pagoda::kernels::ref {

// Dequantizes row r of w into out[w.cols]. Supports F32, F16, BF16, Q8_0, Q4_0, Q4_K,
// Q5_K, Q6_K.
void dequantize_row(const WeightView& w, int64_t r, float* out);

// One K-quant super-block (Q4_K, Q5_K or Q6_K) unpacked: q[e] the unsigned quant of
// weight e; Q4_K/Q5_K: w = d * sc[e / 32] * q[e] - dmin * m[e / 32] (sc, m for j < 8);
// Q6_K: w = d * sc[e / 16] * (q[e] - 32) (sc for j < 16; dmin 0, m unused).
struct KBlock {
    uint8_t q[256];
    float d = 0.0f, dmin = 0.0f;
    int sc[16] = {};
    int m[16] = {};
};
void unpack_k_block(TensorType type, const uint8_t* block, KBlock* out);
// Quantizes n floats (n a multiple of the block size) into `type` (F32, F16, BF16, Q8_0,
// Q4_0) at out, which holds the type's byte size for n elements.
void quantize_row(TensorType type, const float* x, int64_t n, uint8_t* out);
// y[m][w.rows] = x[m][w.cols] * W^T.
void matmul(const WeightView& w, const float* x, int m, float* y);
// out[n] = x[n] / rms(x) * weight[n].
void rmsnorm(const float* x, const float* weight, int n, float eps, float* out);
// out[n] = silu(gate[n]) * up[n].
void swiglu(const float* gate, const float* up, int n, float* out);
// In place, numerically stable.
void softmax(float* x, int n);
// Rotates `num_heads` heads of `head_dim` floats at x for position `pos`.
void rope(float* x, int num_heads, int head_dim, int pos, const RopeParams& p);
// out rows for each query of `seq` (causal), reading K/V through the block table.
void paged_attention(const PagedKv& kv, const AttentionShape& shape, const AttentionSeq& seq,
                     const float* q, float* out);
// Reads element `d` of K or V (which = 0/1) at `pos` for `kv_head`.
float kv_at(const PagedKv& kv, const int32_t* block_table, int which, int pos, int kv_head, int d);
// Writes one token's K and V rows ([num_kv_heads * head_dim] each) at `pos`.
void kv_write(const PagedKv& kv, const int32_t* block_table, int pos, const float* k_row,
              const float* v_row);

}  // namespace pagoda::kernels::ref
