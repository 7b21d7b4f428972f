#pragma once
// Internal entry points of simd.cpp used by the other cpu/ kernels. Thread-safe.

#include <cstddef>
#include <cstdint>

namespace pagoda::kernels::cpu {

// Packed rows: values, then cols/32 float scales (see QuantMatmul).
void quant_rows(uint32_t type, const uint8_t* packed, size_t row_stride, int64_t rows, int64_t cols,
                const int8_t* qx, const float* dx, int m, float* y, int64_t r0, int64_t r1);
void half_to_f32(const uint16_t* in, bool bf16, int n, float* out);
// y[i][r] (row stride `rows`) = dot(w row r, x row i) for r in [r0, r1): w is [rows][cols]
// f16 or bf16, x is [m][cols] f32; f32 products and sums. Batch-invariant.
void half_rows(const uint16_t* w, bool bf16, int64_t rows, int64_t cols, const float* x, int m,
               float* y, int64_t r0, int64_t r1);

}  // namespace pagoda::kernels::cpu
