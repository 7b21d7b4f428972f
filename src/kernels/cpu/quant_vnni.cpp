// Compiled for x86-64 baseline; only the functions marked with target attributes use
// AVX-512, and they run only after have_avx512_vnni() said yes.
#include "kernels/cpu/quant_vnni.h"

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

void pack_vnni_panel(VnniWeights t, const uint8_t* const* src_rows, int valid_rows, int64_t cols,
                     uint8_t* dst) {
    const int64_t nb = cols / 32;
    const bool q8 = t == VnniWeights::kQ8_0;
    const int vectors = q8 ? 8 : 4;  // per half of the panel
    const size_t block_bytes = vnni_panel_block_bytes(t);
    for (int64_t b = 0; b < nb; ++b) {
        uint8_t* vb = dst + size_t(b) * block_bytes;
        auto* scales = reinterpret_cast<uint16_t*>(vb + 2 * vectors * 64);
        for (int r = 0; r < kVnniPanelRows; ++r) {
            uint8_t* lane = vb + (r / 16) * vectors * 64 + (r % 16) * 4;  // + k * 64 for vector k
            if (r >= valid_rows) {  // zero weights: the offset alone; scale 0
                for (int k = 0; k < vectors; ++k) std::memset(lane + k * 64, q8 ? 0x80 : 0x88, 4);
                scales[r] = 0;
                continue;
            }
            if (q8) {
                const auto* blk = reinterpret_cast<const formats::BlockQ8_0*>(src_rows[r]) + b;
                scales[r] = blk->d;
                for (int k = 0; k < 8; ++k) {
                    for (int j = 0; j < 4; ++j)
                        lane[k * 64 + j] = uint8_t(blk->qs[k * 4 + j]) ^ 0x80;
                }
            } else {  // the file's bytes as they are: byte c holds columns c and c + 16
                const auto* blk = reinterpret_cast<const formats::BlockQ4_0*>(src_rows[r]) + b;
                scales[r] = blk->d;
                for (int k = 0; k < 4; ++k) std::memcpy(lane + k * 64, blk->qs + k * 4, 4);
            }
        }
    }
}

#if defined(__x86_64__)

bool have_avx512_vnni() {
    static const bool ok = __builtin_cpu_supports("avx512f") &&
                           __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512dq") &&
                           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("f16c");
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
// Per block: the integer accumulators start at -offset sum(x); 8 vpdpbusd per (half,
// row), one per group of 4 columns; then convert, times the 16 weight scales of the
// half, FMA with the activation scale into the float sums.
template <VnniWeights T, int N>
PAGODA_VNNI void panel_rows(const Gemm& g, int64_t panel, int i0, const uint8_t* prefetch) {
    constexpr bool kQ8 = T == VnniWeights::kQ8_0;
    constexpr size_t kBlockBytes = vnni_panel_block_bytes(T),
                     kHalf = kQ8 ? 512 : 256;  // kHalf: 16 rows x 32 values
    const uint8_t* wp = g.packed + size_t(panel) * g.panel_bytes;
    const int8_t* x[N];
    const float* dx[N];
    const int32_t* cr[N];
    for (int i = 0; i < N; ++i) {
        x[i] = g.qx + size_t(i0 + i) * g.cols;
        dx[i] = g.dx + size_t(i0 + i) * size_t(g.nb);
        cr[i] = g.corr + size_t(i0 + i) * size_t(g.nb);
    }
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    __m512 out[2][N];
    for (int i = 0; i < N; ++i) out[0][i] = out[1][i] = _mm512_setzero_ps();
    for (int b = 0; b < g.nb; ++b) {
        const uint8_t* wb = wp + size_t(b) * kBlockBytes;
        if (prefetch != nullptr) {
            const char* pf = reinterpret_cast<const char*>(prefetch) + size_t(b) * kBlockBytes;
            for (int l = 0; l < int(kBlockBytes / 64); ++l) _mm_prefetch(pf + l * 64, _MM_HINT_T1);
        }
        __m512i acc[2][N];
        for (int i = 0; i < N; ++i) acc[0][i] = acc[1][i] = _mm512_set1_epi32(cr[i][b]);
        const int8_t* xb[N];
        for (int i = 0; i < N; ++i) xb[i] = x[i] + b * 32;
        if constexpr (kQ8) {
            for (int k = 0; k < 8; ++k) {
                const __m512i w0 = _mm512_load_si512(wb + k * 64),
                              w1 = _mm512_load_si512(wb + kHalf + k * 64);
                for (int i = 0; i < N; ++i) {
                    const __m512i xv = bcast4(xb[i] + k * 4);
                    acc[0][i] = _mm512_dpbusd_epi32(acc[0][i], w0, xv);
                    acc[1][i] = _mm512_dpbusd_epi32(acc[1][i], w1, xv);
                }
            }
        } else {
            for (int k = 0; k < 4; ++k) {  // vector k: columns 4k..4k+3 (low) and 16+4k.. (high)
                const __m512i r0 = _mm512_load_si512(wb + k * 64),
                              r1 = _mm512_load_si512(wb + kHalf + k * 64);
                const __m512i lo0 = _mm512_and_si512(r0, low4), lo1 = _mm512_and_si512(r1, low4);
                const __m512i hi0 = _mm512_and_si512(_mm512_srli_epi16(r0, 4), low4);
                const __m512i hi1 = _mm512_and_si512(_mm512_srli_epi16(r1, 4), low4);
                for (int i = 0; i < N; ++i) {
                    const __m512i xl = bcast4(xb[i] + k * 4), xh = bcast4(xb[i] + 16 + k * 4);
                    acc[0][i] =
                        _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(acc[0][i], lo0, xl), hi0, xh);
                    acc[1][i] =
                        _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(acc[1][i], lo1, xl), hi1, xh);
                }
            }
        }
        const __m512i sc = _mm512_load_si512(wb + 2 * kHalf);  // 32 fp16 scales
        const __m512 ws[2] = {_mm512_cvtph_ps(_mm512_castsi512_si256(sc)),
                              _mm512_cvtph_ps(_mm512_extracti64x4_epi64(sc, 1))};
        for (int h = 0; h < 2; ++h) {
            for (int i = 0; i < N; ++i) {
                out[h][i] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(acc[h][i]), ws[h]),
                                            _mm512_set1_ps(dx[i][b]), out[h][i]);
            }
        }
    }
    for (int h = 0; h < 2; ++h) {
        const int64_t r0 = panel * kVnniPanelRows + h * 16;
        const int64_t valid = std::min<int64_t>(16, g.rows - r0);
        if (valid <= 0) break;
        const __mmask16 mask = valid >= 16 ? __mmask16(0xffff) : __mmask16((1u << valid) - 1);
        for (int i = 0; i < N; ++i)
            _mm512_mask_storeu_ps(g.y + size_t(i0 + i) * size_t(g.rows) + size_t(r0), mask,
                                  out[h][i]);
    }
}

constexpr int kRowsPerPass = 6;

template <VnniWeights T>
PAGODA_VNNI void gemm_panels(const Gemm& g, int m, int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
        // Several passes over a panel (m > 6): the first one fetches the next panel into
        // L2 so that its first pass does not wait on DRAM with the prefetchers behind.
        const uint8_t* next =
            m > kRowsPerPass && p + 1 < p1 ? g.packed + size_t(p + 1) * g.panel_bytes : nullptr;
        int i = 0;
        for (; i + kRowsPerPass <= m; i += kRowsPerPass)
            panel_rows<T, kRowsPerPass>(g, p, i, i == 0 ? next : nullptr);
        switch (m - i) {
            case 5: panel_rows<T, 5>(g, p, i, nullptr); break;
            case 4: panel_rows<T, 4>(g, p, i, nullptr); break;
            case 3: panel_rows<T, 3>(g, p, i, nullptr); break;
            case 2: panel_rows<T, 2>(g, p, i, nullptr); break;
            case 1: panel_rows<T, 1>(g, p, i, nullptr); break;
            default: break;
        }
    }
}

}  // namespace

void vnni_gemm(VnniWeights t, const uint8_t* packed, int64_t rows, int64_t cols, const int8_t* qx,
               const float* dx, const int32_t* corr, int m, float* y, int64_t p0, int64_t p1) {
    const Gemm g{
        packed, vnni_panel_bytes(t, cols), int(cols / 32), rows, size_t(cols), qx, dx, corr, y};
    if (t == VnniWeights::kQ8_0) {
        gemm_panels<VnniWeights::kQ8_0>(g, m, p0, p1);
    } else {
        gemm_panels<VnniWeights::kQ4_0>(g, m, p0, p1);
    }
}

#pragma GCC diagnostic pop

#else

bool have_avx512_vnni() { return false; }
void vnni_gemm(VnniWeights, const uint8_t*, int64_t, int64_t, const int8_t*, const float*,
               const int32_t*, int, float*, int64_t, int64_t) {}

#endif

}  // namespace pagoda::kernels::cpu
