// Compiled for x86-64 baseline; the functions marked with target attributes use AVX-512
// and run only after have_avx512_half() said yes.
#include "kernels/cpu/half_panels.h"

#include <algorithm>
#include <cstring>

#include "base/half.h"

#if defined(__x86_64__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace pagoda::kernels::cpu {

void pack_half_panel(const uint16_t* w, int64_t rows, int64_t cols, int64_t p, uint16_t* dst) {
    for (int r = 0; r < kHalfPanelRows; ++r) {
        const int64_t row = p * kHalfPanelRows + r;
        for (int64_t c = 0; c < cols; ++c)
            dst[size_t(c) * kHalfPanelRows + size_t(r)] =
                row < rows ? w[size_t(row * cols + c)] : 0;
    }
}

void pack_bf16_pair_panel(const uint16_t* w, int64_t rows, int64_t cols, int64_t p, uint16_t* dst) {
    for (int r = 0; r < kHalfPanelRows; ++r) {
        const int64_t row = p * kHalfPanelRows + r;
        for (int64_t c = 0; c < 2 * bf16_pairs(cols); ++c) {
            dst[size_t(c / 2) * 2 * kHalfPanelRows + size_t(r) * 2 + size_t(c % 2)] =
                row < rows && c < cols ? w[size_t(row * cols + c)] : 0;
        }
    }
}

namespace {
// Pairs [j0, pairs) of one activation row, scalar.
void bf16_pairs_scalar(const float* xr, int64_t cols, int64_t j0, uint32_t* xb) {
    for (int64_t j = j0; j < bf16_pairs(cols); ++j) {
        const uint32_t lo = float_to_bf16(xr[2 * j]);
        const uint32_t hi = 2 * j + 1 < cols ? float_to_bf16(xr[2 * j + 1]) : 0;
        xb[j] = lo | (hi << 16);
    }
}
}  // namespace

#if defined(__x86_64__)

bool have_avx512_bf16() {
    static const bool ok = have_avx512_half() && __builtin_cpu_supports("avx512bf16");
    return ok;
}

bool have_avx512_half() {
    // Every AVX-512F CPU has F16C (and clang 14's builtin does not know the name).
    static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    return ok;
}

namespace {

#define PAGODA_HALF __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))

template <bool kBf16>
PAGODA_HALF inline __m512 load16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (kBf16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

// The accumulators of P panels from panel p x N activation rows from i0 into y (rows past
// the matrix's last row are not written).
template <int P, int N>
PAGODA_HALF inline void store_panels(const __m512 (&acc)[P][N], int64_t rows, int i0, float* y,
                                     int64_t p) {
    for (int k = 0; k < P; ++k) {
        const int64_t r0 = (p + k) * kHalfPanelRows;
        const int64_t valid = std::min<int64_t>(kHalfPanelRows, rows - r0);
        const __mmask16 mask = valid >= 16 ? __mmask16(0xffff) : __mmask16((1u << valid) - 1);
        for (int i = 0; i < N; ++i)
            _mm512_mask_storeu_ps(y + size_t(i0 + i) * size_t(rows) + size_t(r0), mask, acc[k][i]);
    }
}

// P panels (1 or 2) from panel p x N activation rows from i0.
template <bool kBf16, int P, int N>
PAGODA_HALF void panels_rows(const uint16_t* packed, int64_t rows, int64_t cols, const float* x,
                             int i0, float* y, int64_t p) {
    const uint16_t* w[P];
    for (int k = 0; k < P; ++k) w[k] = packed + size_t(p + k) * size_t(cols) * kHalfPanelRows;
    const float* xr[N];
    for (int i = 0; i < N; ++i) xr[i] = x + size_t(i0 + i) * size_t(cols);
    __m512 acc[P][N];
    for (int k = 0; k < P; ++k)
        for (int i = 0; i < N; ++i) acc[k][i] = _mm512_setzero_ps();
    for (int64_t c = 0; c < cols; ++c) {
        if (N <= 2 && (c & 1) == 0) {  // decode: keep the streams 2 KiB ahead (+17% F16 tg)
            for (int k = 0; k < P; ++k)
                _mm_prefetch(reinterpret_cast<const char*>(w[k] + size_t(c + 64) * kHalfPanelRows),
                             _MM_HINT_T0);
        }
        __m512 wv[P];
        for (int k = 0; k < P; ++k) wv[k] = load16<kBf16>(w[k] + size_t(c) * kHalfPanelRows);
        for (int i = 0; i < N; ++i) {
            const __m512 xb = _mm512_set1_ps(xr[i][c]);
            for (int k = 0; k < P; ++k) acc[k][i] = _mm512_fmadd_ps(wv[k], xb, acc[k][i]);
        }
    }
    store_panels<P, N>(acc, rows, i0, y, p);
}

// The last m % kRows activation rows: N from kRows - 1 down to the one that fits.
template <bool kBf16, int P, int N>
PAGODA_HALF void panels_tail(const uint16_t* packed, int64_t rows, int64_t cols, const float* x,
                             int i, int left, float* y, int64_t p) {
    if constexpr (N > 0) {
        if (left == N) {
            panels_rows<kBf16, P, N>(packed, rows, cols, x, i, y, p);
        } else {
            panels_tail<kBf16, P, N - 1>(packed, rows, cols, x, i, left, y, p);
        }
    }
}

// 6 activation rows a pass: 12 accumulators; each converted weight vector feeds 6 FMAs (12
// rows a pass measured no faster for TinyLlama's F16 prefill: 130-142 vs 153-164 tok/s).
template <bool kBf16, int P>
PAGODA_HALF void panels_all_rows(const uint16_t* packed, int64_t rows, int64_t cols, const float* x,
                                 int m, float* y, int64_t p) {
    constexpr int kRows = 6;
    int i = 0;
    for (; i + kRows <= m; i += kRows) panels_rows<kBf16, P, kRows>(packed, rows, cols, x, i, y, p);
    panels_tail<kBf16, P, kRows - 1>(packed, rows, cols, x, i, m - i, y, p);
}

template <bool kBf16>
PAGODA_HALF void gemm(const uint16_t* packed, int64_t rows, int64_t cols, const float* x, int m,
                      float* y, int64_t p0, int64_t p1) {
    int64_t p = p0;
    for (; p + 2 <= p1; p += 2) panels_all_rows<kBf16, 2>(packed, rows, cols, x, m, y, p);
    if (p < p1) panels_all_rows<kBf16, 1>(packed, rows, cols, x, m, y, p);
}

#define PAGODA_BF16DOT __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// P bf16 pair panels from panel p x N activation rows from i0 (pairs per row: `pairs`).
template <int P, int N>
PAGODA_BF16DOT void bf16_rows(const uint16_t* packed, int64_t rows, int64_t pairs,
                              const uint32_t* xb, int i0, float* y, int64_t p) {
    const uint16_t* w[P];
    for (int k = 0; k < P; ++k) w[k] = packed + size_t(p + k) * size_t(pairs) * 2 * kHalfPanelRows;
    const uint32_t* xr[N];
    for (int i = 0; i < N; ++i) xr[i] = xb + size_t(i0 + i) * size_t(pairs);
    __m512 acc[P][N];
    for (int k = 0; k < P; ++k)
        for (int i = 0; i < N; ++i) acc[k][i] = _mm512_setzero_ps();
    for (int64_t j = 0; j < pairs; ++j) {
        if (N <= 2) {  // decode: keep the streams 2 KiB ahead, as the f32 panels do
            for (int k = 0; k < P; ++k)
                _mm_prefetch(
                    reinterpret_cast<const char*>(w[k] + size_t(j + 32) * 2 * kHalfPanelRows),
                    _MM_HINT_T0);
        }
        __m512bh wv[P];
        for (int k = 0; k < P; ++k) {
            wv[k] = (__m512bh)_mm512_loadu_si512(w[k] + size_t(j) * 2 * kHalfPanelRows);
        }
        for (int i = 0; i < N; ++i) {
            const __m512bh xv = (__m512bh)_mm512_set1_epi32(int(xr[i][j]));
            for (int k = 0; k < P; ++k) acc[k][i] = _mm512_dpbf16_ps(acc[k][i], wv[k], xv);
        }
    }
    store_panels<P, N>(acc, rows, i0, y, p);
}

template <int P, int N>
PAGODA_BF16DOT void bf16_tail(const uint16_t* packed, int64_t rows, int64_t pairs,
                              const uint32_t* xb, int i, int left, float* y, int64_t p) {
    if constexpr (N > 0) {
        if (left == N) {
            bf16_rows<P, N>(packed, rows, pairs, xb, i, y, p);
        } else {
            bf16_tail<P, N - 1>(packed, rows, pairs, xb, i, left, y, p);
        }
    }
}

template <int P>
PAGODA_BF16DOT void bf16_all_rows(const uint16_t* packed, int64_t rows, int64_t pairs,
                                  const uint32_t* xb, int m, float* y, int64_t p) {
    constexpr int kRows = 6;
    int i = 0;
    for (; i + kRows <= m; i += kRows) bf16_rows<P, kRows>(packed, rows, pairs, xb, i, y, p);
    bf16_tail<P, kRows - 1>(packed, rows, pairs, xb, i, m - i, y, p);
}

// 32 floats to 16 pairs at a time (vcvtne2ps2bf16 rounds to nearest even, as
// float_to_bf16 does), the rest scalar.
PAGODA_BF16DOT void pair_row(const float* xr, int64_t cols, uint32_t* xb) {
    int64_t c = 0;
    for (; c + 32 <= cols; c += 32) {
        const __m512bh v =
            _mm512_cvtne2ps_pbh(_mm512_loadu_ps(xr + c + 16), _mm512_loadu_ps(xr + c));
        _mm512_storeu_si512(xb + c / 2, (__m512i)v);
    }
    bf16_pairs_scalar(xr, cols, c / 2, xb);
}

}  // namespace

void bf16_pair_activations(const float* x, int m, int64_t cols, uint32_t* xb) {
    for (int i = 0; i < m; ++i)
        pair_row(x + size_t(i) * size_t(cols), cols, xb + size_t(i) * size_t(bf16_pairs(cols)));
}

void bf16_panels_gemm(const uint16_t* packed, int64_t rows, int64_t cols, const uint32_t* xb, int m,
                      float* y, int64_t p0, int64_t p1) {
    const int64_t pairs = bf16_pairs(cols);
    int64_t p = p0;
    for (; p + 2 <= p1; p += 2) bf16_all_rows<2>(packed, rows, pairs, xb, m, y, p);
    if (p < p1) bf16_all_rows<1>(packed, rows, pairs, xb, m, y, p);
}

void half_panels_gemm(const uint16_t* packed, bool bf16, int64_t rows, int64_t cols, const float* x,
                      int m, float* y, int64_t p0, int64_t p1) {
    if (bf16) {
        gemm<true>(packed, rows, cols, x, m, y, p0, p1);
    } else {
        gemm<false>(packed, rows, cols, x, m, y, p0, p1);
    }
}

#pragma GCC diagnostic pop

#else

bool have_avx512_half() { return false; }
bool have_avx512_bf16() { return false; }
void bf16_pair_activations(const float* x, int m, int64_t cols, uint32_t* xb) {
    for (int i = 0; i < m; ++i)
        bf16_pairs_scalar(x + size_t(i) * size_t(cols), cols, 0,
                          xb + size_t(i) * size_t(bf16_pairs(cols)));
}
void bf16_panels_gemm(const uint16_t*, int64_t, int64_t, const uint32_t*, int, float*, int64_t,
                      int64_t) {}
void half_panels_gemm(const uint16_t*, bool, int64_t, int64_t, const float*, int, float*, int64_t,
                      int64_t) {}

#endif

}  // namespace pagoda::kernels::cpu
