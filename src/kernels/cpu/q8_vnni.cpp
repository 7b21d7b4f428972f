// Compiled for x86-64 baseline; only the functions marked with target attributes use
// AVX-512, and they run only after have_avx512_vnni() said yes.
#include "kernels/cpu/q8_vnni.h"

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

}  // namespace

void quant_rows_q8_vnni(const uint8_t* packed, size_t row_stride, int64_t rows, int64_t cols, const uint8_t* xu,
                        const float* dx, int m, float* y, int64_t r0, int64_t r1) {
    const int nb = int(cols / 32);
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
                        int64_t) {}

#endif

}  // namespace pagoda::kernels::cpu
