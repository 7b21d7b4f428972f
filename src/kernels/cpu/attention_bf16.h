#pragma once
// The tiled attention's two products with vdpbf16ps, for a bf16 KV cache on CPUs with
// AVX512_BF16 (chosen at run time by flash_attention.cpp). Each instruction does 32
// multiply-adds, twice an f32 FMA: a long prompt's attention (its cost grows with the
// square of the length) runs near twice as fast.
//
// Precision: the cache already holds K and V in bf16; the scaled queries are rounded to
// bf16 once per call and the softmax probabilities once per tile (round to nearest even),
// with f32 sums, as GPU flash attention does for bf16 models (llama.cpp likewise rounds Q
// to its f16 cache type). Outputs stay within 1e-2 relative of the f32 reference
// (kernels_test), and keep the flash kernel's invariants: a query's arithmetic depends only
// on its own position and data (every lane one vdpbf16ps chain in order).
//
// Layouts (kTile keys a tile, pairs of bf16 side by side, the first in the low half):
//   K tile kp[d2][t][2]  = K[t][2 d2 + i]: one 64-byte vector is 16 keys x one dim pair;
//   V tile vp[t2][e][2]  = V[2 t2 + i][e]: one vector is 16 dims x one key pair;
//   queries qb[m][hd/2] and probabilities as pairs, broadcast one pair at a time.
// Keys past the tile's nt are gathered as 0.

#include <cstddef>
#include <cstdint>

namespace pagoda::kernels::cpu::attn_bf16 {

constexpr int kTile = 64;  // keys per tile, as flash::kKeyTile

// vdpbf16ps available and the head dim a whole number of 16-dim vectors.
bool usable(int head_dim);

// Keys [0, nt) of a tile into kp: key t's dim 0 at k[t], its dims `dstride` apart (the pool
// keeps K transposed per block).
void gather_k(const uint16_t* const* k, size_t dstride, int nt, int hd, uint16_t* kp);
// Values [0, nt) into vp: key t's row of hd values at v[t].
void gather_v(const uint16_t* const* v, int nt, int hd, uint16_t* vp);

// p[m][t] (row stride kTile) for queries [m0, m1) and key chunks [0, nc) of 16 keys:
// the dot products of qb[m] (hd/2 pairs) with the tile's keys, dim pairs in order.
void scores(const uint32_t* qb, int m0, int m1, const uint16_t* kp, int nc, int hd, float* p);

// The online softmax step of queries [m0, m1) over their valid[m - m0] keys of the tile
// (chunks [0, nc)), as the f32 kernel's: scores become probabilities relative to the running
// max mx[m], alpha[m] is the factor the earlier output and sum shrink by, l[m] holds 16
// per-lane partial sums. Probabilities past valid are 0. Its exponential is accurate to 3e-6
// relative (the probabilities are rounded to bf16 next), a third of the instructions of the
// f32 kernel's.
void softmax(float* p, int m0, int m1, const int* valid, int nc, float* mx, float* l, float* alpha);

// o[m] (row stride hd) = o[m] * alpha[m] + sum over the key pairs covering valid[m - m0]
// keys, in order, of p[m]'s pair (rounded to bf16) times the pair's values. p[m][t] must be
// 0 for t in [valid, the next even number).
void outputs(const float* p, const float* alpha, const int* valid, int m0, int m1,
             const uint16_t* vp, int hd, float* o);

}  // namespace pagoda::kernels::cpu::attn_bf16
