// Compiled for x86-64 baseline; the functions marked PAGODA_BF16ATT use AVX-512 BF16 and run
// only after usable() said yes (see attention_bf16.h).
#include "kernels/cpu/attention_bf16.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/exp_poly.h"
#include "kernels/cpu/half_panels.h"

#if defined(__x86_64__)
#pragma GCC diagnostic push  // GCC 12's AVX-512 headers trip these (as in half_panels.cpp)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace pagoda::kernels::cpu::attn_bf16 {

bool usable(int head_dim) { return head_dim % 16 == 0 && have_avx512_bf16(); }

#if defined(__x86_64__)

#define PAGODA_BF16ATT __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace {

// Two rows of 16 bf16 (masked: lanes past the mask read as 0) side by side as 16 pairs.
PAGODA_BF16ATT inline __m512i pair_up(__m256i lo, __m256i hi) {
    return _mm512_or_si512(_mm512_cvtepu16_epi32(lo),
                           _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
}

PAGODA_BF16ATT inline __m512bh load_bh(const uint16_t* p) {
    return (__m512bh)_mm512_loadu_si512(p);
}

PAGODA_BF16ATT inline __m512bh broadcast_pair(uint32_t pair) {
    return (__m512bh)_mm512_set1_epi32(int(pair));
}

// Query m's scores against chunk c alone: the same chain as the blocked loop in scores().
PAGODA_BF16ATT void score_one(const uint32_t* qb, int m, int c, const uint16_t* kp, int hd2,
                              float* p) {
    __m512 a = _mm512_setzero_ps();
    for (int d2 = 0; d2 < hd2; ++d2) {
        a = _mm512_dpbf16_ps(a, load_bh(kp + (size_t(d2) * kTile + size_t(c) * 16) * 2),
                             broadcast_pair(qb[size_t(m) * size_t(hd2) + size_t(d2)]));
    }
    _mm512_storeu_ps(p + size_t(m) * kTile + size_t(c) * 16, a);
}

// e^x (exp_poly.h), for the probabilities that are rounded to bf16 next (the polynomial's
// error is a thousandth of that rounding); 2^n applied by vscalefps (underflows to 0).
PAGODA_BF16ATT inline __m512 exp_ps(__m512 x) {
    const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(kLog2e));
    const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(t, n);
    __m512 y = _mm512_set1_ps(kExp2Poly[0]);
    for (int k = 1; k < 6; ++k) y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(kExp2Poly[k]));
    return _mm512_scalef_ps(y, n);
}

// Query m's probabilities as bf16 pairs, enough for np pairs.
PAGODA_BF16ATT void prob_pairs(const float* p, int m, int np, uint32_t* pb) {
    const float* pr = p + size_t(m) * kTile;
    for (int j = 0; j * 16 < np; ++j) {
        const __m512bh v =
            _mm512_cvtne2ps_pbh(_mm512_loadu_ps(pr + j * 32 + 16), _mm512_loadu_ps(pr + j * 32));
        _mm512_storeu_si512(pb + j * 16, (__m512i)v);
    }
}

// One query, one 16-dim chunk at e: o = o * alpha (when `scale`) + pairs [t0, t1).
PAGODA_BF16ATT void output_one(const uint32_t* pb, int t0, int t1, const uint16_t* vp, int hd,
                               int e, float* o, float alpha, bool scale) {
    __m512 a = _mm512_loadu_ps(o + e);
    if (scale) a = _mm512_mul_ps(a, _mm512_set1_ps(alpha));
    for (int t2 = t0; t2 < t1; ++t2) {
        a = _mm512_dpbf16_ps(a, load_bh(vp + (size_t(t2) * size_t(hd) + size_t(e)) * 2),
                             broadcast_pair(pb[t2]));
    }
    _mm512_storeu_ps(o + e, a);
}

// Queries [m0, m0 + 4), dims [e, e + 64): together up to the fewest pairs, then each alone.
PAGODA_BF16ATT void outputs4(const uint32_t (&pb)[4][kTile / 2], const int* np, const float* alpha,
                             int m0, const uint16_t* vp, int hd, int e, float* o) {
    __m512 a[4][4];
    float* orow[4];
    int tmin = kTile / 2;
    for (int i = 0; i < 4; ++i) {
        orow[i] = o + size_t(m0 + i) * size_t(hd) + size_t(e);
        const __m512 al = _mm512_set1_ps(alpha[m0 + i]);
        for (int j = 0; j < 4; ++j) a[i][j] = _mm512_mul_ps(_mm512_loadu_ps(orow[i] + j * 16), al);
        tmin = std::min(tmin, np[i]);
    }
    for (int t2 = 0; t2 < tmin; ++t2) {
        const uint16_t* vr = vp + (size_t(t2) * size_t(hd) + size_t(e)) * 2;
        const __m512bh v0 = load_bh(vr), v1 = load_bh(vr + 32), v2 = load_bh(vr + 64),
                       v3 = load_bh(vr + 96);
        for (int i = 0; i < 4; ++i) {
            const __m512bh pv = broadcast_pair(pb[i][t2]);
            a[i][0] = _mm512_dpbf16_ps(a[i][0], v0, pv);
            a[i][1] = _mm512_dpbf16_ps(a[i][1], v1, pv);
            a[i][2] = _mm512_dpbf16_ps(a[i][2], v2, pv);
            a[i][3] = _mm512_dpbf16_ps(a[i][3], v3, pv);
        }
    }
    // Stored before the tails, so the accumulators stay in registers (as in the f32 kernel).
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) _mm512_storeu_ps(orow[i] + j * 16, a[i][j]);
    for (int i = 0; i < 4; ++i) {
        if (np[i] == tmin) continue;
        for (int j = 0; j < 4; ++j)
            output_one(pb[i], tmin, np[i], vp, hd, e + j * 16, orow[i] - e, 1.0f, false);
    }
}

}  // namespace

PAGODA_BF16ATT void gather_k(const uint16_t* const* k, size_t dstride, int nt, int hd,
                             uint16_t* kp) {
    const int hd2 = hd / 2;
    for (int t0 = 0; t0 < nt; t0 += 16) {
        const int n = std::min(16, nt - t0);
        if (k[t0 + n - 1] == k[t0] + (n - 1)) {  // one run of the pool: masked vector loads
            const auto mask = __mmask16((1u << n) - 1u);
            for (int d2 = 0; d2 < hd2; ++d2) {
                const uint16_t* src = k[t0] + size_t(2 * d2) * dstride;
                _mm512_storeu_si512(kp + (size_t(d2) * kTile + size_t(t0)) * 2,
                                    pair_up(_mm256_maskz_loadu_epi16(mask, src),
                                            _mm256_maskz_loadu_epi16(mask, src + dstride)));
            }
            continue;
        }
        for (int d2 = 0; d2 < hd2; ++d2) {  // the chunk crosses blocks
            uint16_t* dst = kp + (size_t(d2) * kTile + size_t(t0)) * 2;
            for (int j = 0; j < 16; ++j) {
                const uint16_t* src = j < n ? k[t0 + j] + size_t(2 * d2) * dstride : nullptr;
                dst[2 * j] = src ? src[0] : 0;
                dst[2 * j + 1] = src ? src[dstride] : 0;
            }
        }
    }
}

PAGODA_BF16ATT void gather_v(const uint16_t* const* v, int nt, int hd, uint16_t* vp) {
    for (int t = 0; t < nt; t += 2) {
        const uint16_t *a = v[t], *b = t + 1 < nt ? v[t + 1] : nullptr;
        uint16_t* dst = vp + size_t(t / 2) * size_t(hd) * 2;
        for (int e = 0; e < hd; e += 16) {
            const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + e));
            const __m256i hi = b ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + e))
                                 : _mm256_setzero_si256();
            _mm512_storeu_si512(dst + size_t(e) * 2, pair_up(lo, hi));
        }
    }
}

PAGODA_BF16ATT void scores(const uint32_t* qb, int m0, int m1, const uint16_t* kp, int nc, int hd,
                           float* p) {
    const int hd2 = hd / 2;
    int c = 0;
    for (; c + 4 <= nc; c += 4) {
        int m = m0;
        for (; m + 4 <= m1; m += 4) {
            __m512 a[4][4];
            for (auto& row : a)
                for (auto& x : row) x = _mm512_setzero_ps();
            for (int d2 = 0; d2 < hd2; ++d2) {
                const uint16_t* kr = kp + (size_t(d2) * kTile + size_t(c) * 16) * 2;
                const __m512bh k0 = load_bh(kr), k1 = load_bh(kr + 32), k2 = load_bh(kr + 64),
                               k3 = load_bh(kr + 96);
                for (int i = 0; i < 4; ++i) {
                    const __m512bh qv =
                        broadcast_pair(qb[size_t(m + i) * size_t(hd2) + size_t(d2)]);
                    a[i][0] = _mm512_dpbf16_ps(a[i][0], k0, qv);
                    a[i][1] = _mm512_dpbf16_ps(a[i][1], k1, qv);
                    a[i][2] = _mm512_dpbf16_ps(a[i][2], k2, qv);
                    a[i][3] = _mm512_dpbf16_ps(a[i][3], k3, qv);
                }
            }
            for (int i = 0; i < 4; ++i) {
                float* pr = p + size_t(m + i) * kTile + size_t(c) * 16;
                for (int j = 0; j < 4; ++j) _mm512_storeu_ps(pr + j * 16, a[i][j]);
            }
        }
        for (; m < m1; ++m)
            for (int j = 0; j < 4; ++j) score_one(qb, m, c + j, kp, hd2, p);
    }
    for (; c < nc; ++c)
        for (int m = m0; m < m1; ++m) score_one(qb, m, c, kp, hd2, p);
}

PAGODA_BF16ATT void softmax(float* p, int m0, int m1, const int* valid, int nc, float* mx, float* l,
                            float* alpha) {
    for (int m = m0; m < m1; ++m) {
        float* pr = p + size_t(m) * kTile;
        const int n = valid[m - m0];
        const uint64_t bits = n >= kTile ? ~uint64_t{0} : (uint64_t{1} << n) - 1u;
        const auto in = [bits](int c) { return __mmask16(bits >> (16 * c)); };  // keys seen
        const float old = mx[m];
        __m512 vmax = _mm512_set1_ps(old);
        __mmask16 grows = 0;
        for (int c = 0; c < nc; ++c)
            grows |= _mm512_mask_cmp_ps_mask(in(c), _mm512_loadu_ps(pr + c * 16), vmax, _CMP_GT_OQ);
        float a = 1.0f;
        if (grows) {
            for (int c = 0; c < nc; ++c)
                vmax = _mm512_mask_max_ps(vmax, in(c), vmax, _mm512_loadu_ps(pr + c * 16));
            const float mnew = _mm512_reduce_max_ps(vmax);
            // The first tile's old max is -inf: e^-87 (~1e-38) scales sums and outputs of 0.
            a = _mm512_cvtss_f32(exp_ps(_mm512_set1_ps(std::max(old - mnew, -87.0f))));
            mx[m] = mnew;
            vmax = _mm512_set1_ps(mnew);
        }
        __m512 sum = _mm512_mul_ps(_mm512_loadu_ps(l + size_t(m) * 16), _mm512_set1_ps(a));
        for (int c = 0; c < nc; ++c) {
            const __m512 e = _mm512_maskz_mov_ps(
                in(c), exp_ps(_mm512_sub_ps(_mm512_loadu_ps(pr + c * 16), vmax)));
            _mm512_storeu_ps(pr + c * 16, e);
            sum = _mm512_add_ps(sum, e);
        }
        _mm512_storeu_ps(l + size_t(m) * 16, sum);
        alpha[m] = a;
    }
}

PAGODA_BF16ATT void outputs(const float* p, const float* alpha, const int* valid, int m0, int m1,
                            const uint16_t* vp, int hd, float* o) {
    uint32_t pb[4][kTile / 2];
    int np[4];
    int m = m0;
    for (; m + 4 <= m1; m += 4) {
        for (int i = 0; i < 4; ++i) {
            np[i] = (valid[m - m0 + i] + 1) / 2;
            prob_pairs(p, m + i, np[i], pb[i]);
        }
        int e = 0;
        for (; e + 64 <= hd; e += 64) outputs4(pb, np, alpha, m, vp, hd, e, o);
        for (int i = 0; i < 4; ++i) {
            for (int e1 = e; e1 < hd; e1 += 16) {
                output_one(pb[i], 0, np[i], vp, hd, e1, o + size_t(m + i) * size_t(hd),
                           alpha[m + i], true);
            }
        }
    }
    for (; m < m1; ++m) {
        np[0] = (valid[m - m0] + 1) / 2;
        prob_pairs(p, m, np[0], pb[0]);
        for (int e = 0; e < hd; e += 16)
            output_one(pb[0], 0, np[0], vp, hd, e, o + size_t(m) * size_t(hd), alpha[m], true);
    }
}

#pragma GCC diagnostic pop

#else

void gather_k(const uint16_t* const*, size_t, int, int, uint16_t*) {}
void gather_v(const uint16_t* const*, int, int, uint16_t*) {}
void scores(const uint32_t*, int, int, const uint16_t*, int, int, float*) {}
void softmax(float*, int, int, const int*, int, float*, float*, float*) {}
void outputs(const float*, const float*, const int*, int, int, const uint16_t*, int, float*) {}

#endif

}  // namespace pagoda::kernels::cpu::attn_bf16
