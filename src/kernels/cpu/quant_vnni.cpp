// Compiled for x86-64 baseline; only the functions marked with target attributes use
// AVX-512, and they run only after have_avx512_vnni() said yes.
#include "kernels/cpu/quant_vnni.h"

#include <algorithm>
#include <cstring>

#include "formats/tensor_type.h"
#include "kernels/ref/ops.h"

#if defined(__x86_64__)
// g++ 12's AVX-512 headers trip its own -Wuninitialized (_mm512_undefined_* inside
// the reduce/insert intrinsics); the values are never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace pagoda::kernels::cpu {

namespace {

formats::TensorType tensor_type_of(VnniWeights t) {
    return t == VnniWeights::kQ4_K   ? formats::TensorType::kQ4_K
           : t == VnniWeights::kQ5_K ? formats::TensorType::kQ5_K
                                     : formats::TensorType::kQ6_K;
}

// One 32-block's values and sub-block scales of row r (lane r % 16 of half r / 16).
void pack_k_block(VnniWeights t, const ref::KBlock& kb, int b, int r, uint8_t* vb) {
    const uint8_t* q = kb.q + 32 * b;
    if (t == VnniWeights::kQ6_K) {  // low nibbles as Q4_0, the two high bits in a plane
        uint8_t* lane = vb + (r / 16) * 256 + (r % 16) * 4;
        uint8_t* hi = vb + 512 + (r / 16) * 128 + (r % 16) * 4;
        for (int k = 0; k < 4; ++k) {
            for (int j = 0; j < 4; ++j) {
                const int c = 4 * k + j;
                lane[k * 64 + j] = uint8_t((q[c] & 15) | ((q[16 + c] & 15) << 4));
                hi[j] = uint8_t(hi[j] | ((q[c] >> 4) << (2 * k)));
                hi[64 + j] = uint8_t(hi[64 + j] | ((q[16 + c] >> 4) << (2 * k)));
            }
        }
        vb[768 + r] = uint8_t(int8_t(kb.sc[2 * b]));
        vb[768 + 32 + r] = uint8_t(int8_t(kb.sc[2 * b + 1]));
        return;
    }
    // Q4_K, Q5_K: nibble pairs as Q4_0 (columns c and c + 16); Q5_K's fifth bits in a plane.
    const bool q5 = t == VnniWeights::kQ5_K;
    uint8_t* lane = vb + (r / 16) * 256 + (r % 16) * 4;
    uint8_t* hi = vb + 512 + (r / 16) * 64 + (r % 16) * 4;
    for (int k = 0; k < 4; ++k) {
        for (int j = 0; j < 4; ++j) {
            const int c = 4 * k + j;
            lane[k * 64 + j] = uint8_t((q[c] & 15) | ((q[16 + c] & 15) << 4));
            if (q5) hi[j] = uint8_t(hi[j] | ((q[c] >> 4) << k) | ((q[16 + c] >> 4) << (4 + k)));
        }
    }
    uint8_t* sc = vb + (q5 ? 640 : 512);
    sc[r] = uint8_t(kb.sc[b]);
    sc[32 + r] = uint8_t(kb.m[b]);
}

void pack_k_panel(VnniWeights t, const uint8_t* const* src_rows, int valid_rows, int64_t cols,
                  uint8_t* dst) {
    const size_t sb_bytes = vnni_panel_superblock_bytes(t);
    const size_t header = t == VnniWeights::kQ6_K ? 128 : 256;
    const size_t block_bytes = (sb_bytes - header) / 8;
    const size_t src_bytes = formats::tensor_type_traits(uint32_t(tensor_type_of(t)))->block_bytes;
    std::memset(dst, 0, vnni_panel_bytes(t, cols));  // rows past valid_rows: all zero
    ref::KBlock kb;
    for (int64_t s = 0; s < cols / 256; ++s) {
        uint8_t* sb = dst + size_t(s) * sb_bytes;
        auto* d = reinterpret_cast<float*>(sb);
        for (int r = 0; r < valid_rows; ++r) {
            ref::unpack_k_block(tensor_type_of(t), src_rows[r] + size_t(s) * src_bytes, &kb);
            d[r] = kb.d;
            if (t != VnniWeights::kQ6_K) d[32 + r] = kb.dmin;
            for (int b = 0; b < 8; ++b) pack_k_block(t, kb, b, r, sb + header + b * block_bytes);
        }
    }
}

}  // namespace

void pack_vnni_panel(VnniWeights t, const uint8_t* const* src_rows, int valid_rows, int64_t cols,
                     uint8_t* dst) {
    if (vnni_is_k(t)) {
        pack_k_panel(t, src_rows, valid_rows, cols, dst);
        return;
    }
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
                for (int k = 0; k < 8; ++k) {  // four columns at a time, + 128 each
                    uint32_t v;
                    std::memcpy(&v, blk->qs + k * 4, 4);
                    v ^= 0x80808080u;
                    std::memcpy(lane + k * 64, &v, 4);
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
                           __builtin_cpu_supports("avx512vnni");  // (F16C: every AVX-512 CPU)
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

// Bit `shift` of every byte of h, moved to bit 4 (Q5_K's fifth bit; one = 0x01 bytes).
PAGODA_VNNI inline __m512i bit4(__m512i h, int shift, __m512i one) {
    return _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, shift), one), 4);
}

PAGODA_VNNI inline __m512i bcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

// N activation rows from i0: their int8 values, block scales and integer corrections
// (corr_per_block per 32-block).
template <int N>
struct ActivationRows {
    const int8_t* x[N];
    const float* dx[N];
    const int32_t* cr[N];
    PAGODA_VNNI ActivationRows(const Gemm& g, int i0, int corr_per_block) {
        for (int i = 0; i < N; ++i) {
            x[i] = g.qx + size_t(i0 + i) * g.cols;
            dx[i] = g.dx + size_t(i0 + i) * size_t(g.nb);
            cr[i] = g.corr + size_t(i0 + i) * size_t(g.nb) * size_t(corr_per_block);
        }
    }
};

// Writes the panel's 32 output rows (fewer in the last panel) for N activation rows.
template <int N>
PAGODA_VNNI inline void store_panel(const Gemm& g, int64_t panel, int i0,
                                    const __m512 (&out)[2][N]) {
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
    const ActivationRows<N> a(g, i0, 1);
    const auto& x = a.x;
    const auto& dx = a.dx;
    const auto& cr = a.cr;
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
    store_panel<N>(g, panel, i0, out);
}

// K-quants, one panel x N activation rows: per super-block the 32 rows' d (and dmin),
// per 32-block the integer dot products of the unsigned quants (from 0), then in f32:
//   Q4_K/Q5_K: out += dx (acc (d sc)) - (dx sum(x)) (dmin m)
//   Q6_K:      out += dx d (acc_lo sc_lo + acc_hi sc_hi), acc_* starting at -32 sum(x)
// over columns 0-15 and 16-31 of the block.
#define PAGODA_VNNI_INLINE PAGODA_VNNI inline __attribute__((always_inline))

// One Q6_K 32-block of a panel against N rows: the nibbles as Q4_K, plus bits 4-5 from the
// plane (2k, 2k + 1), into acc[half][column group][row].
template <int N>
PAGODA_VNNI_INLINE void dot_q6_block(const uint8_t* wb, const int8_t* const (&xb)[N],
                                     __m512i (&acc)[2][2][N]) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i h[2][2] = {{_mm512_load_si512(wb + 512), _mm512_load_si512(wb + 576)},
                             {_mm512_load_si512(wb + 640), _mm512_load_si512(wb + 704)}};
    const __m512i two = _mm512_set1_epi8(0x03);
    for (int k = 0; k < 4; ++k) {
        __m512i v[2][2];  // [half][column group]
        for (int hh = 0; hh < 2; ++hh) {
            const __m512i r = _mm512_load_si512(wb + hh * 256 + k * 64);
            const __m512i b0 = _mm512_and_si512(_mm512_srli_epi16(h[hh][0], 2 * k), two);
            const __m512i b1 = _mm512_and_si512(_mm512_srli_epi16(h[hh][1], 2 * k), two);
            v[hh][0] = _mm512_or_si512(_mm512_and_si512(r, low4), _mm512_slli_epi16(b0, 4));
            v[hh][1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(r, 4), low4),
                                       _mm512_slli_epi16(b1, 4));
        }
        for (int i = 0; i < N; ++i) {
            const __m512i xl = bcast4(xb[i] + k * 4), xh = bcast4(xb[i] + 16 + k * 4);
            for (int hh = 0; hh < 2; ++hh) {
                acc[hh][0][i] = _mm512_dpbusd_epi32(acc[hh][0][i], v[hh][0], xl);
                acc[hh][1][i] = _mm512_dpbusd_epi32(acc[hh][1][i], v[hh][1], xh);
            }
        }
    }
}

// One Q4_K or Q5_K 32-block (Q5_K adds bit 4 from its plane: bits k and 4 + k).
template <bool kQ4, int N>
PAGODA_VNNI_INLINE void dot_q45_block(const uint8_t* wb, const int8_t* const (&xb)[N],
                                      __m512i (&acc)[2][2][N]) {
    constexpr size_t kHalf = 256;  // the nibble vectors of a half
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    __m512i h0 = _mm512_setzero_si512(), h1 = h0;
    if constexpr (!kQ4) h0 = _mm512_load_si512(wb + 512), h1 = _mm512_load_si512(wb + 576);
    const __m512i one = _mm512_set1_epi8(0x01);
    for (int k = 0; k < 4; ++k) {
        const __m512i r0 = _mm512_load_si512(wb + k * 64),
                      r1 = _mm512_load_si512(wb + kHalf + k * 64);
        __m512i lo0 = _mm512_and_si512(r0, low4), lo1 = _mm512_and_si512(r1, low4);
        __m512i hi0 = _mm512_and_si512(_mm512_srli_epi16(r0, 4), low4);
        __m512i hi1 = _mm512_and_si512(_mm512_srli_epi16(r1, 4), low4);
        if constexpr (!kQ4) {
            lo0 = _mm512_or_si512(lo0, bit4(h0, k, one));
            lo1 = _mm512_or_si512(lo1, bit4(h1, k, one));
            hi0 = _mm512_or_si512(hi0, bit4(h0, 4 + k, one));
            hi1 = _mm512_or_si512(hi1, bit4(h1, 4 + k, one));
        }
        for (int i = 0; i < N; ++i) {
            const __m512i xl = bcast4(xb[i] + k * 4), xh = bcast4(xb[i] + 16 + k * 4);
            acc[0][0][i] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(acc[0][0][i], lo0, xl), hi0, xh);
            acc[1][0][i] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(acc[1][0][i], lo1, xl), hi1, xh);
        }
    }
}

// A 32-block's integer sums to f32 with the block's scales (and mins), into out[half][row].
template <bool kQ6, int N>
PAGODA_VNNI_INLINE void scale_block(const uint8_t* sc, const __m512 (&d)[2],
                                    const __m512 (&dmin)[2], const __m512i (&acc)[2][2][N],
                                    const ActivationRows<N>& a, int b, __m512 (&out)[2][N]) {
    const auto& dx = a.dx;
    const auto& cr = a.cr;
    for (int h = 0; h < 2; ++h) {
        const __m128i s0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + 16 * h));
        const __m128i s1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + 32 + 16 * h));
        if constexpr (kQ6) {
            const __m512 slo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(s0)), d[h]);
            const __m512 shi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(s1)), d[h]);
            for (int i = 0; i < N; ++i) {
                const __m512 v =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[h][0][i]), slo,
                                    _mm512_mul_ps(_mm512_cvtepi32_ps(acc[h][1][i]), shi));
                out[h][i] = _mm512_fmadd_ps(v, _mm512_set1_ps(dx[i][b]), out[h][i]);
            }
        } else {
            const __m512 ws = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(s0)), d[h]);
            const __m512 wm = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(s1)), dmin[h]);
            for (int i = 0; i < N; ++i) {
                const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[h][0][i]), ws);
                out[h][i] = _mm512_fmadd_ps(v, _mm512_set1_ps(dx[i][b]), out[h][i]);
                out[h][i] =
                    _mm512_fnmadd_ps(wm, _mm512_set1_ps(dx[i][b] * float(cr[i][b])), out[h][i]);
            }
        }
    }
}

template <VnniWeights T, int N>
PAGODA_VNNI void panel_rows_k(const Gemm& g, int64_t panel, int i0) {
    constexpr bool kQ4 = T == VnniWeights::kQ4_K, kQ6 = T == VnniWeights::kQ6_K;
    constexpr size_t kHeader = kQ6 ? 128 : 256;
    constexpr size_t kScales = kQ6 ? 768 : kQ4 ? 512 : 640;  // after the bit planes
    constexpr size_t kBlockBytes = kScales + 64;
    constexpr int kCorr = kQ6 ? 2 : 1;
    const uint8_t* wp = g.packed + size_t(panel) * g.panel_bytes;
    const ActivationRows<N> a(g, i0, kCorr);
    const auto& x = a.x;
    const auto& cr = a.cr;
    __m512 out[2][N];
    for (int i = 0; i < N; ++i) out[0][i] = out[1][i] = _mm512_setzero_ps();
    for (int s = 0; s < g.nb / 8; ++s) {
        const uint8_t* sb = wp + size_t(s) * vnni_panel_superblock_bytes(T);
        const auto* hd = reinterpret_cast<const float*>(sb);
        const __m512 d[2] = {_mm512_loadu_ps(hd), _mm512_loadu_ps(hd + 16)};
        __m512 dmin[2] = {d[0], d[1]};
        if constexpr (!kQ6) dmin[0] = _mm512_loadu_ps(hd + 32), dmin[1] = _mm512_loadu_ps(hd + 48);
        for (int bb = 0; bb < 8; ++bb) {
            const int b = s * 8 + bb;
            const uint8_t* wb = sb + kHeader + size_t(bb) * kBlockBytes;
            const uint8_t* sc = wb + kScales;
            if constexpr (N <= 2) {  // decode: keep the panel's stream ahead of use (+10% on
                // TinyLlama Q4_K_M; none for Q8_0's panels, which go without)
                const char* pf = reinterpret_cast<const char*>(wb) + 4 * kBlockBytes;
                for (size_t l = 0; l < kBlockBytes; l += 64) _mm_prefetch(pf + l, _MM_HINT_T0);
            }
            __m512i acc[2][2][N];  // [half][column group (Q6_K) or 0][row]
            for (int i = 0; i < N; ++i) {
                for (int h = 0; h < 2; ++h) {
                    acc[h][0][i] = kQ6 ? _mm512_set1_epi32(cr[i][2 * b]) : _mm512_setzero_si512();
                    if constexpr (kQ6) acc[h][1][i] = _mm512_set1_epi32(cr[i][2 * b + 1]);
                }
            }
            const int8_t* xb[N];
            for (int i = 0; i < N; ++i) xb[i] = x[i] + b * 32;
            if constexpr (kQ6) {
                dot_q6_block<N>(wb, xb, acc);
            } else {
                dot_q45_block<kQ4, N>(wb, xb, acc);
            }
            scale_block<kQ6, N>(sc, d, dmin, acc, a, b, out);
        }
    }
    store_panel<N>(g, panel, i0, out);
}

template <VnniWeights T>
PAGODA_VNNI void gemm_panels_k(const Gemm& g, int m, int64_t p0, int64_t p1) {
    constexpr int kRows = T == VnniWeights::kQ6_K ? 4 : 6;
    for (int64_t p = p0; p < p1; ++p) {
        int i = 0;
        for (; i + kRows <= m; i += kRows) panel_rows_k<T, kRows>(g, p, i);
        switch (m - i) {
            case 5: panel_rows_k<T, 5>(g, p, i); break;
            case 4: panel_rows_k<T, 4>(g, p, i); break;
            case 3: panel_rows_k<T, 3>(g, p, i); break;
            case 2: panel_rows_k<T, 2>(g, p, i); break;
            case 1: panel_rows_k<T, 1>(g, p, i); break;
            default: break;
        }
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
    switch (t) {
        case VnniWeights::kQ8_0: gemm_panels<VnniWeights::kQ8_0>(g, m, p0, p1); break;
        case VnniWeights::kQ4_0: gemm_panels<VnniWeights::kQ4_0>(g, m, p0, p1); break;
        case VnniWeights::kQ4_K: gemm_panels_k<VnniWeights::kQ4_K>(g, m, p0, p1); break;
        case VnniWeights::kQ5_K: gemm_panels_k<VnniWeights::kQ5_K>(g, m, p0, p1); break;
        case VnniWeights::kQ6_K: gemm_panels_k<VnniWeights::kQ6_K>(g, m, p0, p1); break;
    }
}

#pragma GCC diagnostic pop

#else

bool have_avx512_vnni() { return false; }
void vnni_gemm(VnniWeights, const uint8_t*, int64_t, int64_t, const int8_t*, const float*,
               const int32_t*, int, float*, int64_t, int64_t) {}

#endif

}  // namespace pagoda::kernels::cpu
