// Compiled for x86-64 baseline; only the functions marked with target attributes use
// AVX-512, and they run only after have_avx512_vnni() said yes.
#include "kernels/cpu/q8_vnni.h"

#include <algorithm>

#if defined(__x86_64__)
// g++ 12's AVX-512 headers trip its own -Wuninitialized (_mm512_undefined_* inside
// the reduce/insert intrinsics); the values are never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace pagoda::kernels::cpu {

#if defined(__x86_64__)

bool have_avx512_vnni() {
    static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni") &&
                           __builtin_cpu_supports("f16c");
    return ok;
}

namespace {

#define PAGODA_VNNI __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,f16c")))

// Two 32-blocks per 512-bit step. Activations arrive as unsigned bytes (x + 128) so one
// vpdpbusd multiplies them with the signed weights: sum((x+128) w) = sum(x w) + 128 sum(w);
// a second vpdpbusd against ones gives sum(w) per group of four, so 128 sum(w) is removed
// in the integer domain without another memory stream.
PAGODA_VNNI inline __m512 block_pair(const int8_t* w, const uint8_t* xu, __mmask64 mask, float s0, float s1,
                                     __m512 acc) {
    const __m512i vw = _mm512_maskz_loadu_epi8(mask, w);
    const __m512i vx = _mm512_maskz_loadu_epi8(mask, xu);
    const __m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), vx, vw);
    // Remove the +128 offset: 128 * sum(w) per group of four, from one more vpdpbusd.
    const __m512i sw = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), vw);
    const __m512i exact = _mm512_sub_epi32(dp, _mm512_slli_epi32(sw, 7));
    const __m512 scale = _mm512_insertf32x8(_mm512_set1_ps(s0), _mm256_set1_ps(s1), 1);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact), scale, acc);
}

// The row's scales stay fp16 as in the file (2 bytes a block instead of 4: decode reads
// ~6% fewer bytes); F16C widens them one at a time.
PAGODA_VNNI inline float sc(const uint16_t* wd, const float* dx, int b) { return _cvtsh_ss(wd[b]) * dx[b]; }

PAGODA_VNNI float dot_row(const int8_t* w, const uint16_t* wd, const uint8_t* xu, const float* dx, int nb) {
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int b = 0;
    for (; b + 4 <= nb; b += 4) {
        acc0 = block_pair(w + b * 32, xu + b * 32, ~__mmask64(0), sc(wd, dx, b), sc(wd, dx, b + 1), acc0);
        acc1 = block_pair(w + b * 32 + 64, xu + b * 32 + 64, ~__mmask64(0), sc(wd, dx, b + 2), sc(wd, dx, b + 3),
                          acc1);
    }
    for (; b + 2 <= nb; b += 2) {
        acc0 = block_pair(w + b * 32, xu + b * 32, ~__mmask64(0), sc(wd, dx, b), sc(wd, dx, b + 1), acc0);
    }
    if (b < nb) acc1 = block_pair(w + b * 32, xu + b * 32, __mmask64(0xffffffffu), sc(wd, dx, b), 0.0f, acc1);
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

// One weight row against N activation rows (batched decode and prefill). Per pair of
// blocks the weight vector, its +128 correction and its scales are prepared once, then
// each activation row costs one vpdpbusd (accumulating onto -128 sum(w), so the offset
// vanishes in the integer domain), one convert, one multiply of the two scale vectors
// and one FMA.
// R weight rows x N activation rows, one pair of 32-blocks.
template <int R, int N>
PAGODA_VNNI inline void pair_rows(const int8_t* const* w, const uint16_t* const* wd, const uint8_t* xu,
                                  size_t x_stride, const float* dxe, size_t dxe_stride, int p, bool full,
                                  __m512 (*acc)[N]) {
    const __m512i ones = _mm512_set1_epi8(1);
    const __mmask64 mask = full ? ~__mmask64(0) : __mmask64(0xffffffffu);
    __m512i vw[R], neg[R];
    __m512 dwv[R];
    for (int k = 0; k < R; ++k) {
        vw[k] = _mm512_maskz_loadu_epi8(mask, w[k] + p * 64);
        neg[k] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                  _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, vw[k]), 7));
        const float s1 = full ? _cvtsh_ss(wd[k][2 * p + 1]) : 0.0f;
        dwv[k] = _mm512_insertf32x8(_mm512_set1_ps(_cvtsh_ss(wd[k][2 * p])), _mm256_set1_ps(s1), 1);
    }
    for (int i = 0; i < N; ++i) {
        const __m512i vx = _mm512_maskz_loadu_epi8(mask, xu + size_t(i) * x_stride + size_t(p) * 64);
        const __m512 dx = _mm512_loadu_ps(dxe + size_t(i) * dxe_stride + size_t(p) * 16);
        for (int k = 0; k < R; ++k) {
            const __m512i exact = _mm512_dpbusd_epi32(neg[k], vx, vw[k]);
            acc[k][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(dwv[k], dx), acc[k][i]);
        }
    }
}

// R weight rows against N activation rows (batched decode and prefill). Per pair of
// blocks each weight vector, its +128 correction and its scales are prepared once; each
// activation vector is loaded once for the R rows; each product costs one vpdpbusd
// (accumulating onto -128 sum(w), so the offset vanishes in the integer domain), one
// convert, one multiply of the two scale vectors and one FMA. The accumulation order is
// exactly dot_row's (pairs alternate between two accumulators, the odd last block goes
// to the second), so a row's result does not depend on how many rows share the call:
// greedy output stays batch-invariant.
template <int R, int N>
PAGODA_VNNI void dot_rows(const int8_t* const* w, const uint16_t* const* wd, const uint8_t* xu, size_t x_stride,
                          const float* dxe, size_t dxe_stride, int nb, float* const* out, size_t out_stride) {
    __m512 acc0[R][N], acc1[R][N];
    for (int k = 0; k < R; ++k) {
        for (int i = 0; i < N; ++i) acc0[k][i] = acc1[k][i] = _mm512_setzero_ps();
    }
    int b = 0;
    for (; b + 4 <= nb; b += 4) {
        pair_rows<R, N>(w, wd, xu, x_stride, dxe, dxe_stride, b / 2, true, acc0);
        pair_rows<R, N>(w, wd, xu, x_stride, dxe, dxe_stride, b / 2 + 1, true, acc1);
    }
    for (; b + 2 <= nb; b += 2) pair_rows<R, N>(w, wd, xu, x_stride, dxe, dxe_stride, b / 2, true, acc0);
    if (b < nb) pair_rows<R, N>(w, wd, xu, x_stride, dxe, dxe_stride, b / 2, false, acc1);
    for (int k = 0; k < R; ++k) {
        for (int i = 0; i < N; ++i) out[k][size_t(i) * out_stride] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[k][i], acc1[k][i]));
    }
}

template <int R>
PAGODA_VNNI void dot_rows_n(int n, const int8_t* const* w, const uint16_t* const* wd, const uint8_t* xu, size_t x_stride,
                            const float* dxe, size_t dxe_stride, int nb, float* const* out, size_t out_stride) {
    switch (n) {
        case 4: dot_rows<R, 4>(w, wd, xu, x_stride, dxe, dxe_stride, nb, out, out_stride); break;
        case 3: dot_rows<R, 3>(w, wd, xu, x_stride, dxe, dxe_stride, nb, out, out_stride); break;
        case 2: dot_rows<R, 2>(w, wd, xu, x_stride, dxe, dxe_stride, nb, out, out_stride); break;
        default: dot_rows<R, 1>(w, wd, xu, x_stride, dxe, dxe_stride, nb, out, out_stride); break;
    }
}

}  // namespace

void expand_scales_q8_vnni(const float* dx, int64_t cols, float* dxe) {
    const int nb = int(cols / 32);
    const int pairs = (nb + 1) / 2;
    for (int p = 0; p < pairs; ++p) {
        const float a = dx[2 * p], b = 2 * p + 1 < nb ? dx[2 * p + 1] : 0.0f;
        for (int j = 0; j < 8; ++j) {
            dxe[p * 16 + j] = a;
            dxe[p * 16 + 8 + j] = b;
        }
    }
}

void quant_rows_q8_vnni(const uint8_t* packed, size_t row_stride, int64_t rows, int64_t cols, const uint8_t* xu,
                        const float* dx, int m, float* y, int64_t r0, int64_t r1, const float* dxe) {
    const int nb = int(cols / 32);
    if (dxe != nullptr) {
        // Four activation rows (and their scales) stay in L1 while the tile's weight rows pass.
        const size_t es = expanded_scales_size(cols);
        for (int i = 0; i < m; i += 4) {
            const uint8_t* xi = xu + size_t(i) * size_t(cols);
            const float* ei = dxe + size_t(i) * es;
            const int n = std::min(4, m - i);
            int64_t r = r0;
            auto row_ptrs = [&](int64_t rr, const int8_t*& wr, const uint16_t*& wdr, float*& yr) {
                const uint8_t* row = packed + size_t(rr) * row_stride;
                wr = reinterpret_cast<const int8_t*>(row);
                wdr = reinterpret_cast<const uint16_t*>(row + size_t(nb) * 32);
                yr = y + size_t(i) * size_t(rows) + size_t(rr);
            };
            for (; r + 2 <= r1; r += 2) {
                const int8_t* w2[2];
                const uint16_t* d2[2];
                float* y2[2];
                row_ptrs(r, w2[0], d2[0], y2[0]);
                row_ptrs(r + 1, w2[1], d2[1], y2[1]);
                dot_rows_n<2>(n, w2, d2, xi, size_t(cols), ei, es, nb, y2, size_t(rows));
            }
            if (r < r1) {
                const int8_t* w1[1];
                const uint16_t* d1[1];
                float* y1[1];
                row_ptrs(r, w1[0], d1[0], y1[0]);
                dot_rows_n<1>(n, w1, d1, xi, size_t(cols), ei, es, nb, y1, size_t(rows));
            }
        }
        return;
    }
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = packed + size_t(r) * row_stride;
        const auto* wr = reinterpret_cast<const int8_t*>(row);
        const auto* wdr = reinterpret_cast<const uint16_t*>(row + size_t(nb) * 32);
        if (m <= 4 && r + 2 < r1) {  // decode streams weights from DRAM: fetch two rows ahead
            const char* next = reinterpret_cast<const char*>(packed + size_t(r + 2) * row_stride);
            for (size_t off = 0; off < row_stride; off += 64) _mm_prefetch(next + off, _MM_HINT_T0);
        }
        for (int i = 0; i < m; ++i) {
            y[size_t(i) * size_t(rows) + size_t(r)] =
                dot_row(wr, wdr, xu + size_t(i) * size_t(cols), dx + size_t(i) * size_t(nb), nb);
        }
    }
}

#pragma GCC diagnostic pop

#else

bool have_avx512_vnni() { return false; }
void quant_rows_q8_vnni(const uint8_t*, size_t, int64_t, int64_t, const uint8_t*, const float*, int, float*, int64_t,
                        int64_t, const float*) {}
void expand_scales_q8_vnni(const float*, int64_t, float*) {}

#endif

}  // namespace pagoda::kernels::cpu
