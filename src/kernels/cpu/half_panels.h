#pragma once
// F16/BF16 x f32 matmul with AVX-512 (chosen at run time; half_rows in simd.cpp serves
// other CPUs). Pure functions; thread-safe.
//
// Weights are repacked once into panels of 16 rows: for each column, the 16 rows' values
// (the file's 16-bit floats) side by side, 32 bytes. The kernel converts one such vector
// to f32 (vcvtph2ps, or a shift for bf16) and multiplies it by one broadcast activation
// per activation row, two panels at a time: an outer product per column, so a prefill
// batch reuses each converted weight vector up to 6 times from registers and decode
// streams each panel once. Every output lane sums its products in column order whatever
// the batch (batch-invariant).

#include <cstddef>
#include <cstdint>

namespace pagoda::kernels::cpu {

bool have_avx512_half();

constexpr int kHalfPanelRows = 16;
inline size_t half_panel_bytes(int64_t cols) { return size_t(cols) * kHalfPanelRows * 2; }

// Packs rows [16p, 16p + 16) of a [rows][cols] 16-bit matrix into panel p at dst (rows
// past `rows` are zero).
void pack_half_panel(const uint16_t* w, int64_t rows, int64_t cols, int64_t p, uint16_t* dst);

// y[i][r] (row stride `rows`) for the rows of panels [p0, p1) and m activation rows x
// (row stride cols).
void half_panels_gemm(const uint16_t* packed, bool bf16, int64_t rows, int64_t cols, const float* x,
                      int m, float* y, int64_t p0, int64_t p1);

}  // namespace pagoda::kernels::cpu
