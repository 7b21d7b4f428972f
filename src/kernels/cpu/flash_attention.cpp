// Causal attention over a paged KV cache, tiled flash-style: one work item is a run of
// query rows of one sequence times the query heads that share one KV head (GQA); it walks
// the keys in fixed tiles of kKeyTile positions, gathers each tile once (K transposed,
// widened to f32) and uses it for every query of the item, with an online softmax (running
// max and sum, the output rescaled when the max grows). Keys past a query's position are
// masked, tiles past the item's last row are never read.
//
// Reproducibility: a query's arithmetic depends only on its own position and data, never
// on the other queries of its item, the rows per item, the batch or the KV block size: the
// tiles sit at fixed positions (multiples of kKeyTile), each score is one FMA chain over
// the head dimension in order, each output element one FMA chain over the keys in order.
// So a prompt's last row computes the same as a decode step at that position would.
//
// A bf16 pool on a CPU with AVX512_BF16 takes the vdpbf16ps path of attention_bf16.h for
// both products (the tile gathered as bf16 pairs, queries and probabilities rounded to
// bf16); the online softmax and the item loop are shared.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/flash_attention.cpp"
// clang-format off
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/half.h"
#include "kernels/cpu/attention_bf16.h"
#include "kernels/cpu/exp_poly.h"
#include "kernels/cpu/half_panels.h"
#include "kernels/types.h"

#ifndef PAGODA_FLASH_ATTENTION_SHARED
#define PAGODA_FLASH_ATTENTION_SHARED
namespace pagoda::kernels::cpu::flash {

constexpr int kKeyTile = 64;  // keys per tile: a multiple of every SIMD width we target

// One work item: rows [pos0, pos0 + rows) of a sequence, the `group` query heads of KV
// head `kv_head`. q/out point at the first row's first head of the group.
struct Item {
    const PagedKv* kv = nullptr;
    const int32_t* block_table = nullptr;
    int kv_head = 0;
    int pos0 = 0;
    int rows = 0;
    int group = 0;
    float scale = 1.0f;
    const float* q = nullptr;
    int q_stride = 0;
    float* out = nullptr;
    int out_stride = 0;
};

// Per-thread buffers, reused across items and calls.
struct Scratch {
    std::vector<float> q;   // [M][hd], scaled queries
    std::vector<float> o;   // [M][hdp], running outputs
    std::vector<float> kt;  // [hd][kKeyTile], the tile's keys transposed
    std::vector<float> v;   // [kKeyTile][hdp], the tile's values (padding columns stay 0)
    std::vector<float> p;   // [M][kKeyTile], scores, then probabilities
    std::vector<float> mx, l, alpha;
    std::vector<int> valid;  // [M], keys of the current tile each query sees
    // Where the current tile is read: chunk c's N keys of dimension d at kc[c] + d * ks,
    // key t's values at vr[t] (hdp readable columns). Either the gathered copies above or,
    // for an f32 pool whose blocks hold whole chunks, the pool itself.
    const float* kc[kKeyTile] = {};
    size_t ks = 0;
    const float* vr[kKeyTile] = {};
    // The bf16 dot path (attention_bf16.h): queries as bf16 pairs [M][hd/2], the tile in
    // its layouts, and where each key's K (dims block_size apart) and V row sit in the pool.
    std::vector<uint32_t> qb;
    std::vector<uint16_t> kp, vp;
    const uint16_t* kb[kKeyTile] = {};
    const uint16_t* vb[kKeyTile] = {};
    std::vector<float> krow;  // a quantized pool: one key's row, dequantized before transposing
};

}  // namespace pagoda::kernels::cpu::flash
#endif

HWY_BEFORE_NAMESPACE();
namespace pagoda::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using flash::Item;
using flash::kKeyTile;
using flash::Scratch;

// n values of the pool (f32, f16 or bf16) at `src` as f32 into `dst`.
template <class D>
HWY_INLINE void Widen(D df, const void* pool, KvDtype dtype, size_t src, int n, float* dst) {
    const int N = int(hn::Lanes(df));
    int i = 0;
    if (dtype == KvDtype::kF32) {  // inline vector copies: the runs are 16-64 values
        const float* in = static_cast<const float*>(pool) + src;
        for (; i + N <= n; i += N) hn::StoreU(hn::LoadU(df, in + i), df, dst + i);
        for (; i < n; ++i) dst[i] = in[i];
        return;
    }
    const uint16_t* in = static_cast<const uint16_t*>(pool) + src;
    if (dtype == KvDtype::kBF16) {
        const hn::Rebind<uint16_t, D> du16;
        const hn::Rebind<uint32_t, D> du32;
        for (; i + N <= n; i += N) {
            const auto u = hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, in + i)));
            hn::StoreU(hn::BitCast(df, u), df, dst + i);
        }
        for (; i < n; ++i) dst[i] = bf16_to_float(in[i]);
    } else {
        const hn::Rebind<hwy::float16_t, D> dh;
        for (; i + N <= n; i += N) {
            const auto h = hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(in + i));
            hn::StoreU(hn::PromoteTo(df, h), df, dst + i);
        }
        for (; i < n; ++i) dst[i] = fp16_to_float(in[i]);
    }
}

// Offset (in elements) of the item's KV head in the block holding position t.
HWY_INLINE size_t BlockBase(const Item& it, int t) {
    const PagedKv& kv = *it.kv;
    return size_t(it.block_table[t / kv.block_size]) * kv.block_stride() +
           size_t(it.kv_head) * kv.head_stride();
}

// Calls f(base, slot, n, i) for each run of keys [t0, t0 + nt) that one block holds: n
// keys from `slot` of the block at `base` (BlockBase), the run's first key being the
// tile's i-th.
template <class F>
HWY_INLINE void ForEachBlockRun(const Item& it, int t0, int nt, F&& f) {
    const int bs = it.kv->block_size;
    for (int t = t0; t < t0 + nt;) {
        const int slot = t % bs, n = std::min(bs - slot, t0 + nt - t);
        f(BlockBase(it, t), slot, n, t - t0);
        t += n;
    }
}

// Keys [t0, t0 + nt) of one KV head into s.kt (transposed, as the pool keeps K) and s.v.
template <class D>
HWY_INLINE void GatherTile(D df, const Item& it, int t0, int nt, int hdp, Scratch& s) {
    const PagedKv& kv = *it.kv;
    const int bs = kv.block_size, hd = kv.head_dim, N = int(hn::Lanes(df));
    for (int c = 0; c * N < nt; ++c) s.kc[c] = s.kt.data() + size_t(c * N);
    s.ks = kKeyTile;
    for (int t = 0; t < nt; ++t) s.vr[t] = s.v.data() + size_t(t) * size_t(hdp);
    ForEachBlockRun(it, t0, nt, [&](size_t base, int slot, int n, int i) {
        for (int d = 0; d < hd; ++d) {
            Widen(df, kv.k, kv.dtype, base + size_t(d) * size_t(bs) + size_t(slot), n,
                  s.kt.data() + size_t(d) * kKeyTile + size_t(i));
        }
        for (int j = 0; j < n; ++j) {
            Widen(df, kv.v, kv.dtype, base + size_t(slot + j) * size_t(hd), hd,
                  s.v.data() + size_t(i + j) * size_t(hdp));
        }
    });
}

// One q8_0 row of hd values (kernels/types.h) as f32 into dst: fp16(d) * q, as
// kv_quant_value.
template <class D>
HWY_INLINE void DequantQ8Row(D df, const uint8_t* row, int hd, float* dst) {
    const hn::Rebind<int8_t, D> di8;
    const hn::Rebind<int32_t, D> di32;
    const int N = int(hn::Lanes(df));
    for (int b = 0; b < hd / kKvQ8Block; ++b) {
        const uint8_t* blk = row + size_t(b) * kKvQ8BlockBytes;
        uint16_t dh;
        std::memcpy(&dh, blk, 2);
        const auto d = hn::Set(df, fp16_to_float(dh));
        const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
        float* out = dst + size_t(b) * kKvQ8Block;
        for (int i = 0; i < kKvQ8Block; i += N) {
            const auto v = hn::ConvertTo(df, hn::PromoteTo(di32, hn::LoadU(di8, q + i)));
            hn::StoreU(hn::Mul(v, d), df, out + i);
        }
    }
}

// One q4_0 row of hd values (kernels/types.h) as f32 into dst: fp16(d) * (q - 8), as
// kv_quant_value.
template <class D>
HWY_INLINE void DequantQ4Row(D df, const uint8_t* row, int hd, float* dst) {
    constexpr int kHalf = kKvQ8Block / 2;
    const int N = int(hn::Lanes(df));
    if (N > kHalf) {  // wider than a block's half: value by value
        for (int i = 0; i < hd; ++i) dst[i] = kv_quant_value(KvDtype::kQ4_0, row, i);
        return;
    }
    const hn::Rebind<uint8_t, D> du8;
    const hn::Rebind<int32_t, D> di32;
    const auto low = hn::Set(du8, uint8_t(15));
    const auto eight = hn::Set(df, 8.0f);
    for (int b = 0; b < hd / kKvQ8Block; ++b) {
        const uint8_t* blk = row + size_t(b) * kKvQ4BlockBytes;
        uint16_t dh;
        std::memcpy(&dh, blk, 2);
        const auto d = hn::Set(df, fp16_to_float(dh));
        float* out = dst + size_t(b) * kKvQ8Block;
        for (int i = 0; i < kHalf; i += N) {
            const auto q = hn::LoadU(du8, blk + 2 + i);
            const auto lo = hn::ConvertTo(df, hn::PromoteTo(di32, hn::And(q, low)));
            const auto hi = hn::ConvertTo(df, hn::PromoteTo(di32, hn::ShiftRight<4>(q)));
            hn::StoreU(hn::Mul(hn::Sub(lo, eight), d), df, out + i);
            hn::StoreU(hn::Mul(hn::Sub(hi, eight), d), df, out + kHalf + i);
        }
    }
}

// Keys [t0, t0 + nt) of a quantized (q8_0, q4_0) pool into s.kt (transposed) and s.v,
// dequantized.
template <class D>
HWY_INLINE void GatherTileQuant(D df, const Item& it, int t0, int nt, int hdp, Scratch& s) {
    const PagedKv& kv = *it.kv;
    const int bs = kv.block_size, hd = kv.head_dim, N = int(hn::Lanes(df));
    for (int c = 0; c * N < nt; ++c) s.kc[c] = s.kt.data() + size_t(c * N);
    s.ks = kKeyTile;
    s.krow.resize(size_t(hd));
    const auto dequant = kv.dtype == KvDtype::kQ4_0 ? DequantQ4Row<D> : DequantQ8Row<D>;
    for (int j = 0; j < nt; ++j) {
        const int32_t block = it.block_table[(t0 + j) / bs];
        const int slot = (t0 + j) % bs;
        float* v = s.v.data() + size_t(j) * size_t(hdp);
        dequant(df, kv.quant_row(kv.v, block, it.kv_head, slot), hd, v);
        s.vr[j] = v;
        dequant(df, kv.quant_row(kv.k, block, it.kv_head, slot), hd, s.krow.data());
        for (int d = 0; d < hd; ++d) s.kt[size_t(d) * kKeyTile + size_t(j)] = s.krow[size_t(d)];
    }
}

// The tile read in place: an f32 pool whose blocks hold whole chunks of N keys (block size a
// multiple of N) and whose value rows need no padding (head dim a multiple of N). A partial
// last chunk reads slots past the tile's keys inside its block: those scores are masked.
HWY_INLINE bool ReadsInPlace(const PagedKv& kv, int N) {
    return kv.dtype == KvDtype::kF32 && kv.block_size % N == 0 && kv.head_dim % N == 0;
}

template <class D>
HWY_INLINE void PointAtPool(D df, const Item& it, int t0, int nt, Scratch& s) {
    const PagedKv& kv = *it.kv;
    const int bs = kv.block_size, hd = kv.head_dim, N = int(hn::Lanes(df));
    const auto* k = static_cast<const float*>(kv.k);
    const auto* v = static_cast<const float*>(kv.v);
    for (int c = 0; c * N < nt; ++c) {
        const int t = t0 + c * N;
        s.kc[c] = k + BlockBase(it, t) + size_t(t % bs);
    }
    s.ks = size_t(bs);
    for (int t = t0; t < t0 + nt; ++t)
        s.vr[t - t0] = v + BlockBase(it, t) + size_t(t % bs) * size_t(hd);
}

// Keys [t0, t0 + nt) of a bf16 pool into s.kp / s.vp (attention_bf16.h's layouts).
HWY_INLINE void GatherTileBf16(const Item& it, int t0, int nt, Scratch& s) {
    const PagedKv& kv = *it.kv;
    const int bs = kv.block_size, hd = kv.head_dim;
    const auto* k = static_cast<const uint16_t*>(kv.k);
    const auto* v = static_cast<const uint16_t*>(kv.v);
    ForEachBlockRun(it, t0, nt, [&](size_t base, int slot, int n, int i) {
        for (int j = 0; j < n; ++j) {
            s.kb[i + j] = k + base + size_t(slot + j);
            s.vb[i + j] = v + base + size_t(slot + j) * size_t(hd);
        }
    });
    attn_bf16::gather_k(s.kb, size_t(bs), nt, hd, s.kp.data());
    attn_bf16::gather_v(s.vb, nt, hd, s.vp.data());
}

// One query's scores against key chunk c (N keys) of the tile: the same FMA chain over d
// as the blocked path below.
template <class D>
HWY_INLINE void ScoreChunk(D df, int m, int c, int hd, Scratch& s) {
    const int N = int(hn::Lanes(df));
    const float* q = s.q.data() + size_t(m) * size_t(hd);
    const float* kt = s.kc[c];
    auto a = hn::Zero(df);
    for (int d = 0; d < hd; ++d)
        a = hn::MulAdd(hn::Set(df, q[d]), hn::LoadU(df, kt + size_t(d) * s.ks), a);
    hn::StoreU(a, df, s.p.data() + size_t(m) * kKeyTile + size_t(c * N));
}

// Scores of queries [m0, m1) against key chunks [0, nc) of the tile: s.p[m][t] =
// sum over d in order of q[m][d] * k[t][d]. Four queries x four chunks at a time where
// they fit; every score is the same FMA chain whichever block computes it.
template <class D>
HWY_INLINE void TileScores(D df, int m0, int m1, int nc, int hd, Scratch& s) {
    const int N = int(hn::Lanes(df));
    const size_t ks = s.ks;
    int c = 0;
    for (; c + 4 <= nc; c += 4) {
        int m = m0;
        for (; m + 4 <= m1; m += 4) {
            decltype(hn::Zero(df)) a[4][4];
            for (auto& row : a)
                for (auto& x : row) x = hn::Zero(df);
            const float *kc0 = s.kc[c], *kc1 = s.kc[c + 1], *kc2 = s.kc[c + 2], *kc3 = s.kc[c + 3];
            for (int d = 0; d < hd; ++d) {
                const size_t o = size_t(d) * ks;
                const auto k0 = hn::LoadU(df, kc0 + o), k1 = hn::LoadU(df, kc1 + o);
                const auto k2 = hn::LoadU(df, kc2 + o), k3 = hn::LoadU(df, kc3 + o);
                for (int i = 0; i < 4; ++i) {
                    const auto qv = hn::Set(df, s.q[size_t(m + i) * size_t(hd) + size_t(d)]);
                    a[i][0] = hn::MulAdd(qv, k0, a[i][0]);
                    a[i][1] = hn::MulAdd(qv, k1, a[i][1]);
                    a[i][2] = hn::MulAdd(qv, k2, a[i][2]);
                    a[i][3] = hn::MulAdd(qv, k3, a[i][3]);
                }
            }
            for (int i = 0; i < 4; ++i) {
                float* pr = s.p.data() + size_t(m + i) * kKeyTile + size_t(c * N);
                for (int j = 0; j < 4; ++j) hn::StoreU(a[i][j], df, pr + j * N);
            }
        }
        for (; m < m1; ++m)
            for (int j = 0; j < 4; ++j) ScoreChunk(df, m, c + j, hd, s);
    }
    for (; c < nc; ++c)
        for (int m = m0; m < m1; ++m) ScoreChunk(df, m, c, hd, s);
}

// e^x for x in [-87, 0] (exp_poly.h), 2^n built in the exponent bits (n >= -126: a normal
// float). Half the instructions of hn::Exp; the error is far below what f16/bf16 caches
// make and within the kernel's tested 1e-5.
template <class D, class V>
HWY_INLINE V ExpNonPositive(D df, V x) {
    const hn::RebindToSigned<D> di;
    const auto t = hn::Mul(x, hn::Set(df, kLog2e));
    const auto n = hn::Round(t);
    const auto f = hn::Sub(t, n);
    auto y = hn::Set(df, kExp2Poly[0]);
    for (int k = 1; k < 6; ++k) y = hn::MulAdd(y, f, hn::Set(df, kExp2Poly[k]));
    const auto two_n =
        hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127))));
    return hn::Mul(y, two_n);
}

// Online softmax step of query m over its `valid` keys of the tile (chunks [0, nc)):
// scores become probabilities relative to the running max; s.alpha[m] is the factor the
// earlier output and sum shrink by. The max is reduced across lanes only when a score
// exceeds it (a few tiles per query: the running max of a row is a record value), and the
// sum stays a vector of per-lane partial sums, reduced once at the end (s.l: [M][N]).
template <class D>
HWY_INLINE void SoftmaxStep(D df, int m, int valid, int nc, Scratch& s) {
    const int N = int(hn::Lanes(df));
    const hn::RebindToSigned<D> di;
    float* pr = s.p.data() + size_t(m) * kKeyTile;
    const auto neg_inf = hn::Set(df, -INFINITY);
    const bool full = valid == nc * N;
    const auto In = [&](int c) {  // the chunk's keys this query sees
        return hn::RebindMask(df, hn::Lt(hn::Iota(di, c * N), hn::Set(di, valid)));
    };
    const auto Scores = [&](int c) {
        const auto x = hn::LoadU(df, pr + c * N);
        return full ? x : hn::IfThenElse(In(c), x, neg_inf);
    };
    const float old = s.mx[size_t(m)];
    auto vmax = hn::Set(df, old);
    auto grows = hn::Lt(vmax, vmax);  // all false
    for (int c = 0; c < nc; ++c) grows = hn::Or(grows, hn::Gt(Scores(c), vmax));
    float alpha = 1.0f;
    if (!hn::AllFalse(df, grows)) {
        for (int c = 0; c < nc; ++c) vmax = hn::Max(vmax, Scores(c));
        const float mnew = hn::GetLane(hn::MaxOfLanes(df, vmax));
        alpha = std::exp(old - mnew);
        s.mx[size_t(m)] = mnew;
        vmax = hn::Set(df, mnew);
    }
    const auto floor = hn::Set(df, -87.0f);
    float* lv = s.l.data() + size_t(m) * size_t(N);
    auto vsum = hn::Mul(hn::LoadU(df, lv), hn::Set(df, alpha));
    for (int c = 0; c < nc; ++c) {
        const auto e = ExpNonPositive(df, hn::Max(hn::Sub(Scores(c), vmax), floor));
        const auto p = full ? e : hn::IfThenElseZero(In(c), e);
        hn::StoreU(p, df, pr + c * N);
        vsum = hn::Add(vsum, p);
    }
    hn::StoreU(vsum, df, lv);
    s.alpha[size_t(m)] = alpha;
}

// o[m] = o[m] * alpha[m] + sum over its valid keys t (in order) of p[m][t] * v[t], for one
// chunk of N output dims starting at e, queries [m0, m0 + 4) together up to the fewest
// valid keys among them, then each alone.
template <class D>
HWY_INLINE void TileOutputs4(D df, int m0, int e, const int* valid, int hdp, Scratch& s) {
    const int N = int(hn::Lanes(df));
    decltype(hn::Zero(df)) a[4][4];
    float* o[4];
    const float* p[4];
    int tmin = kKeyTile;
    for (int i = 0; i < 4; ++i) {
        o[i] = s.o.data() + size_t(m0 + i) * size_t(hdp) + size_t(e);
        p[i] = s.p.data() + size_t(m0 + i) * kKeyTile;
        const auto al = hn::Set(df, s.alpha[size_t(m0 + i)]);
        for (int j = 0; j < 4; ++j) a[i][j] = hn::Mul(hn::LoadU(df, o[i] + j * N), al);
        tmin = std::min(tmin, valid[i]);
    }
    for (int t = 0; t < tmin; ++t) {
        const float* vr = s.vr[t] + e;
        const auto v0 = hn::LoadU(df, vr), v1 = hn::LoadU(df, vr + N);
        const auto v2 = hn::LoadU(df, vr + 2 * N), v3 = hn::LoadU(df, vr + 3 * N);
        for (int i = 0; i < 4; ++i) {
            const auto pv = hn::Set(df, p[i][t]);
            a[i][0] = hn::MulAdd(pv, v0, a[i][0]);
            a[i][1] = hn::MulAdd(pv, v1, a[i][1]);
            a[i][2] = hn::MulAdd(pv, v2, a[i][2]);
            a[i][3] = hn::MulAdd(pv, v3, a[i][3]);
        }
    }
    // Stored before the tails: indexing a[i] at run time there would keep all 16
    // accumulators in memory through the loop above.
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) hn::StoreU(a[i][j], df, o[i] + j * N);
    for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 4 && valid[i] > tmin; ++j) {
            auto x = hn::LoadU(df, o[i] + j * N);
            for (int t = tmin; t < valid[i]; ++t)
                x = hn::MulAdd(hn::Set(df, p[i][t]), hn::LoadU(df, s.vr[t] + e + j * N), x);
            hn::StoreU(x, df, o[i] + j * N);
        }
    }
}

// The same for one query and one chunk of N output dims.
template <class D>
HWY_INLINE void TileOutput1(D df, int m, int e, int valid, int hdp, Scratch& s) {
    float* o = s.o.data() + size_t(m) * size_t(hdp) + size_t(e);
    const float* p = s.p.data() + size_t(m) * kKeyTile;
    auto a = hn::Mul(hn::LoadU(df, o), hn::Set(df, s.alpha[size_t(m)]));
    for (int t = 0; t < valid; ++t) {
        a = hn::MulAdd(hn::Set(df, p[t]), hn::LoadU(df, s.vr[t] + e), a);
    }
    hn::StoreU(a, df, o);
}

template <class D>
HWY_INLINE void TileOutputs(D df, int m0, int m1, const int* valid, int hdp, Scratch& s) {
    const int N = int(hn::Lanes(df));
    int e = 0;
    for (; e + 4 * N <= hdp; e += 4 * N) {
        int m = m0;
        for (; m + 4 <= m1; m += 4) TileOutputs4(df, m, e, valid + (m - m0), hdp, s);
        for (; m < m1; ++m) {
            for (int j = 0; j < 4; ++j) TileOutput1(df, m, e + j * N, valid[m - m0], hdp, s);
        }
    }
    for (; e < hdp; e += N) {
        for (int m = m0; m < m1; ++m) TileOutput1(df, m, e, valid[m - m0], hdp, s);
    }
}

// Sizes the scratch for an item and loads its queries, scaled. `widened`: the tiles are
// gathered into f32 copies (GatherTile), which need s.kt and s.v.
HWY_INLINE void StartItem(const Item& it, int hdp, bool widened, Scratch& s) {
    const int hd = it.kv->head_dim, M = it.rows * it.group;
    s.q.resize(size_t(M) * size_t(hd));
    s.o.assign(size_t(M) * size_t(hdp), 0.0f);
    s.p.resize(size_t(M) * kKeyTile);
    if (widened && s.kt.size() < size_t(hd) * kKeyTile) s.kt.assign(size_t(hd) * kKeyTile, 0.0f);
    if (widened && s.v.size() != size_t(kKeyTile) * size_t(hdp))
        s.v.assign(size_t(kKeyTile) * size_t(hdp), 0.0f);
    s.mx.assign(size_t(M), -INFINITY);
    s.l.assign(size_t(M) * size_t(hn::Lanes(hn::ScalableTag<float>())), 0.0f);
    s.alpha.assign(size_t(M), 1.0f);
    s.valid.resize(size_t(M));
    for (int r = 0; r < it.rows; ++r) {
        for (int j = 0; j < it.group; ++j) {
            const float* src = it.q + size_t(r) * size_t(it.q_stride) + size_t(j) * size_t(hd);
            float* dst = s.q.data() + size_t(r * it.group + j) * size_t(hd);
            for (int d = 0; d < hd; ++d) dst[d] = src[d] * it.scale;
        }
    }
}

void FlashItem(const Item& it, Scratch& s) {
    const hn::ScalableTag<float> df;
    const int N = int(hn::Lanes(df));
    const int hd = it.kv->head_dim, g = it.group, M = it.rows * g;
    const int hdp = (hd + N - 1) / N * N;
    const bool in_place = ReadsInPlace(*it.kv, N);
    // attn_bf16 keeps 16 per-lane sums in s.l: the AVX-512 targets' width (a CPU with
    // AVX512_BF16 runs one of them unless the build leaves them out).
    const bool bf16_dot = N == 16 && it.kv->dtype == KvDtype::kBF16 && attn_bf16::usable(hd);
    StartItem(it, hdp, !in_place && !bf16_dot, s);
    if (bf16_dot) {
        s.qb.resize(size_t(M) * size_t(hd / 2));
        bf16_pair_activations(s.q.data(), M, hd, s.qb.data());
        s.kp.resize(size_t(hd) * kKeyTile);
        s.vp.resize(size_t(hd) * kKeyTile);
    }
    const int last = it.pos0 + it.rows - 1;
    for (int t0 = 0; t0 <= last; t0 += kKeyTile) {
        const int nt = std::min(kKeyTile, last + 1 - t0), nc = (nt + N - 1) / N;
        const int m0 = std::max(0, t0 - it.pos0) * g;  // earlier queries see none of the tile
        if (bf16_dot) {
            GatherTileBf16(it, t0, nt, s);
            attn_bf16::scores(s.qb.data(), m0, M, s.kp.data(), nc, hd, s.p.data());
        } else {
            if (in_place) {
                PointAtPool(df, it, t0, nt, s);
            } else if (kv_quantized(it.kv->dtype)) {
                GatherTileQuant(df, it, t0, nt, hdp, s);
            } else {
                GatherTile(df, it, t0, nt, hdp, s);
            }
            TileScores(df, m0, M, nc, hd, s);
        }
        for (int m = m0; m < M; ++m) s.valid[size_t(m)] = std::min(nt, it.pos0 + m / g + 1 - t0);
        if (bf16_dot) {
            attn_bf16::softmax(s.p.data(), m0, M, s.valid.data() + m0, nc, s.mx.data(), s.l.data(),
                               s.alpha.data());
            attn_bf16::outputs(s.p.data(), s.alpha.data(), s.valid.data() + m0, m0, M, s.vp.data(),
                               hd, s.o.data());
        } else {
            for (int m = m0; m < M; ++m) SoftmaxStep(df, m, s.valid[size_t(m)], nc, s);
            TileOutputs(df, m0, M, s.valid.data() + m0, hdp, s);
        }
    }
    for (int r = 0; r < it.rows; ++r) {
        for (int j = 0; j < g; ++j) {
            const int m = r * g + j;
            const hn::ScalableTag<float> dl;
            const float inv =
                1.0f / hn::GetLane(hn::SumOfLanes(
                           dl, hn::LoadU(dl, s.l.data() + size_t(m) * hn::Lanes(dl))));
            const float* o = s.o.data() + size_t(m) * size_t(hdp);
            float* dst = it.out + size_t(r) * size_t(it.out_stride) + size_t(j) * size_t(hd);
            for (int d = 0; d < hd; ++d) dst[d] = o[d] * inv;
        }
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace pagoda::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/cpu/ops.h"

namespace pagoda::kernels::cpu {
HWY_EXPORT(FlashItem);

namespace {
// Query rows per work item: enough queries (rows x group) to reuse each gathered tile
// well, few enough that the item's buffers stay in the core's L2 (128 queries: ~120 KiB).
// 128 against 64 queries: +3-5% (f32) and +5-8% (bf16) at 2048-8192 tokens.
int rows_per_item(int group) { return std::max(1, 128 / group); }
}  // namespace

void paged_attention_batch(const PagedKv& kv, const AttentionShape& shape,
                           const std::vector<AttentionSeq>& seqs,
                           const std::vector<int>& row_offsets, const float* q, float* out) {
    const int group = shape.num_heads / kv.num_kv_heads, R = rows_per_item(group);
    const size_t hd = size_t(kv.head_dim);
    std::vector<flash::Item> items;
    for (int s = 0; s < int(seqs.size()); ++s) {
        const AttentionSeq& seq = seqs[size_t(s)];
        // Last rows first: they read the most keys, so the dynamic schedule ends evenly.
        for (int r0 = (seq.num_q - 1) / R * R; r0 >= 0; r0 -= R) {
            const size_t row = size_t(row_offsets[size_t(s)] + r0);
            for (int h = 0; h < kv.num_kv_heads; ++h) {
                flash::Item it;
                it.kv = &kv;
                it.block_table = seq.block_table;
                it.kv_head = h;
                it.pos0 = seq.q_pos0 + r0;
                it.rows = std::min(R, seq.num_q - r0);
                it.group = group;
                it.scale = shape.scale;
                it.q = q + row * size_t(shape.q_stride) + size_t(h * group) * hd;
                it.q_stride = shape.q_stride;
                it.out = out + row * size_t(shape.out_stride) + size_t(h * group) * hd;
                it.out_stride = shape.out_stride;
                items.push_back(it);
            }
        }
    }
    const int64_t n = int64_t(items.size());
#pragma omp parallel
    {
        thread_local flash::Scratch scratch;
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < n; ++i) HWY_DYNAMIC_DISPATCH(FlashItem)(items[size_t(i)], scratch);
    }
}

void paged_attention(const PagedKv& kv, const AttentionShape& shape, const AttentionSeq& seq,
                     const float* q, float* out) {
    paged_attention_batch(kv, shape, {seq}, {0}, q, out);
}

}  // namespace pagoda::kernels::cpu
#endif
