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

// BF16 weights on CPUs with AVX512_BF16: panels of 16 rows holding, per pair of columns,
// the 16 rows' two values side by side (64 bytes: one vdpbf16ps operand); activations are
// rounded to bf16 pairs once per call (as llama.cpp and oneDNN do for bf16 weights), and
// each vdpbf16ps does 32 multiply-adds, twice an f32 FMA. Used for every batch size, so
// each output still sums its products in column order whatever the batch.
bool have_avx512_bf16();
inline int64_t bf16_pairs(int64_t cols) { return (cols + 1) / 2; }
inline size_t bf16_panel_bytes(int64_t cols) {
    return size_t(bf16_pairs(cols)) * kHalfPanelRows * 4;
}
void pack_bf16_pair_panel(const uint16_t* w, int64_t rows, int64_t cols, int64_t p, uint16_t* dst);
// x[m][cols] f32 to xb[m][bf16_pairs(cols)] pairs of bf16 (round to nearest even; an odd
// last column is paired with 0).
void bf16_pair_activations(const float* x, int m, int64_t cols, uint32_t* xb);
void bf16_panels_gemm(const uint16_t* packed, int64_t rows, int64_t cols, const uint32_t* xb, int m,
                      float* y, int64_t p0, int64_t p1);

}  // namespace pagoda::kernels::cpu
