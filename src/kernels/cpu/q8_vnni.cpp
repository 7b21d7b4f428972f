// Compiled for x86-64 baseline; only the functions marked with target attributes use
// AVX-512, and they run only after have_avx512_vnni() said yes.
#include "kernels/cpu/q8_vnni.h"

#include <algorithm>
#include <cstring>

#include "formats/tensor_type.h"

#if defined(__x86_64__)
// g++ 12's AVX-512 headers trip its own -Wuninitialized (_mm512_undefined_* inside
// the reduce/insert intrinsics); the values are never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace pagoda::kernels::cpu {

void pack_q8_vnni_panel(const uint8_t* const* src_rows, int valid_rows, int64_t cols, uint8_t* dst) {
    const int64_t nb = cols / 32;
    for (int64_t b = 0; b < nb; ++b) {
        uint8_t* vb = dst + size_t(b) * kQ8PanelBlockBytes;
        auto* scales = reinterpret_cast<uint16_t*>(vb + 2 * 512);
        for (int r = 0; r < kQ8PanelRows; ++r) {
            uint8_t* lane = vb + (r / 16) * 512 + (r % 16) * 4;  // + g * 64 for column group g
            if (r >= valid_rows) {  // a zero weight is 128 once offset; scale 0
                for (int g = 0; g < 8; ++g) std::memset(lane + g * 64, 0x80, 4);
                scales[r] = 0;
                continue;
            }
            const auto* blk = reinterpret_cast<const formats::BlockQ8_0*>(src_rows[r]) + b;
            scales[r] = blk->d;
            for (int g = 0; g < 8; ++g) {
                for (int j = 0; j < 4; ++j) lane[g * 64 + j] = uint8_t(blk->qs[g * 4 + j]) ^ 0x80;
            }
        }
    }
}

#if defined(__x86_64__)

bool have_avx512_vnni() {
    static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni") &&
                           __builtin_cpu_supports("f16c");
    return ok;
}

namespace {

#define PAGODA_VNNI __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,f16c")))

struct Gemm {
    const uint8_t* packed;
    size_t panel_bytes;
    int nb;
    int64_t rows;
    size_t cols;
    const int8_t* qx;
    const float* dx;
    const int32_t* corr;
    float* y;
};

PAGODA_VNNI inline __m512i bcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

// One panel (32 output rows, two halves of 16 lanes) x N activation rows, all blocks.
// Per block: the integer accumulators start at -128 sum(x); 8 vpdpbusd per (half, row);
// then convert, times the 16 weight scales of the half, FMA with the activation scale
// into the float sums.
template <int N>
PAGODA_VNNI void panel_rows(const Gemm& g, int64_t panel, int i0, const uint8_t* prefetch) {
    const uint8_t* wp = g.packed + size_t(panel) * g.panel_bytes;
    const int8_t* x[N];
    const float* dx[N];
    const int32_t* cr[N];
    for (int i = 0; i < N; ++i) {
        x[i] = g.qx + size_t(i0 + i) * g.cols;
        dx[i] = g.dx + size_t(i0 + i) * size_t(g.nb);
        cr[i] = g.corr + size_t(i0 + i) * size_t(g.nb);
    }
    __m512 out[2][N];
    for (int i = 0; i < N; ++i) out[0][i] = out[1][i] = _mm512_setzero_ps();
    for (int b = 0; b < g.nb; ++b) {
        const uint8_t* wb = wp + size_t(b) * kQ8PanelBlockBytes;
        if (prefetch != nullptr) {
            const char* pf = reinterpret_cast<const char*>(prefetch) + size_t(b) * kQ8PanelBlockBytes;
            for (int l = 0; l < int(kQ8PanelBlockBytes / 64); ++l) _mm_prefetch(pf + l * 64, _MM_HINT_T1);
        }
        __m512i acc[2][N];
        for (int i = 0; i < N; ++i) acc[0][i] = acc[1][i] = _mm512_set1_epi32(cr[i][b]);
        for (int k = 0; k < 8; ++k) {
            const __m512i w0 = _mm512_load_si512(wb + k * 64), w1 = _mm512_load_si512(wb + 512 + k * 64);
            for (int i = 0; i < N; ++i) {
                const __m512i xv = bcast4(x[i] + b * 32 + k * 4);
                acc[0][i] = _mm512_dpbusd_epi32(acc[0][i], w0, xv);
                acc[1][i] = _mm512_dpbusd_epi32(acc[1][i], w1, xv);
            }
        }
        const __m512i sc = _mm512_load_si512(wb + 1024);  // 32 fp16 scales
        const __m512 ws[2] = {_mm512_cvtph_ps(_mm512_castsi512_si256(sc)), _mm512_cvtph_ps(_mm512_extracti64x4_epi64(sc, 1))};
        for (int h = 0; h < 2; ++h) {
            for (int i = 0; i < N; ++i) {
                out[h][i] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(acc[h][i]), ws[h]), _mm512_set1_ps(dx[i][b]),
                                            out[h][i]);
            }
        }
    }
    for (int h = 0; h < 2; ++h) {
        const int64_t r0 = panel * kQ8PanelRows + h * 16;
        const int64_t valid = std::min<int64_t>(16, g.rows - r0);
        if (valid <= 0) break;
        const __mmask16 mask = valid >= 16 ? __mmask16(0xffff) : __mmask16((1u << valid) - 1);
        for (int i = 0; i < N; ++i) _mm512_mask_storeu_ps(g.y + size_t(i0 + i) * size_t(g.rows) + size_t(r0), mask, out[h][i]);
    }
}

constexpr int kRowsPerPass = 6;

}  // namespace

void q8_vnni_gemm(const uint8_t* packed, int64_t rows, int64_t cols, const int8_t* qx, const float* dx,
                  const int32_t* corr, int m, float* y, int64_t p0, int64_t p1) {
    const Gemm g{packed, q8_vnni_panel_bytes(cols), int(cols / 32), rows, size_t(cols), qx, dx, corr, y};
    for (int64_t p = p0; p < p1; ++p) {
        // Several passes over a panel (m > 6): the first one fetches the next panel into
        // L2 so that its first pass does not wait on DRAM with the prefetchers behind.
        const uint8_t* next = m > kRowsPerPass && p + 1 < p1 ? packed + size_t(p + 1) * g.panel_bytes : nullptr;
        int i = 0;
        for (; i + kRowsPerPass <= m; i += kRowsPerPass) panel_rows<kRowsPerPass>(g, p, i, i == 0 ? next : nullptr);
        switch (m - i) {
            case 5: panel_rows<5>(g, p, i, nullptr); break;
            case 4: panel_rows<4>(g, p, i, nullptr); break;
            case 3: panel_rows<3>(g, p, i, nullptr); break;
            case 2: panel_rows<2>(g, p, i, nullptr); break;
            case 1: panel_rows<1>(g, p, i, nullptr); break;
            default: break;
        }
    }
}

#pragma GCC diagnostic pop

#else

bool have_avx512_vnni() { return false; }
void q8_vnni_gemm(const uint8_t*, int64_t, int64_t, const int8_t*, const float*, const int32_t*, int, float*, int64_t,
                  int64_t) {}

#endif

}  // namespace pagoda::kernels::cpu
