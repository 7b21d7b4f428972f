#pragma once
// Q8_0 x Q8 dot products with AVX-512 VNNI (vpdpbusd: 64 int8 products per instruction),
// chosen at run time when the CPU has it; the Highway kernels serve every other CPU.
// Pure functions; thread-safe.

#include <cstddef>
#include <cstdint>

namespace pagoda::kernels::cpu {

bool have_avx512_vnni();

// Rows [r0, r1) of repacked Q8_0 weights against m activation rows given as unsigned
// bytes xu = q + 128 with scales dx. Each packed row: cols int8 values, then cols/32
// fp16 scales (as stored in the file). `dxe` (optional, for m > 1): each activation row's
// scales expanded for the batched kernel, see expand_scales_q8_vnni; nullptr = row by row.
void quant_rows_q8_vnni(const uint8_t* packed, size_t row_stride, int64_t rows, int64_t cols, const uint8_t* xu,
                        const float* dx, int m, float* y, int64_t r0, int64_t r1, const float* dxe = nullptr);

// Floats per activation row of the expanded scales: 16 per pair of 32-blocks.
inline size_t expanded_scales_size(int64_t cols) { return size_t((cols / 32 + 1) / 2) * 16; }
// dxe[p*16 + 0..7] = dx[2p], dxe[p*16 + 8..15] = dx[2p+1] (0 past the last block).
void expand_scales_q8_vnni(const float* dx, int64_t cols, float* dxe);

}  // namespace pagoda::kernels::cpu
