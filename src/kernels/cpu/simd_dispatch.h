#pragma once
// Internal entry points of simd.cpp used by the other cpu/ kernels. Thread-safe.

#include <cstddef>
#include <cstdint>

namespace pagoda::kernels::cpu {

// Packed rows: values, then cols/32 float scales (see QuantMatmul).
void quant_rows(uint32_t type, const uint8_t* packed, size_t row_stride, int64_t rows, int64_t cols, const int8_t* qx,
                const float* dx, int m, float* y, int64_t r0, int64_t r1);
void half_to_f32(const uint16_t* in, bool bf16, int n, float* out);

}  // namespace pagoda::kernels::cpu
