// Highway SIMD kernels, compiled once per x86 target and dispatched at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd.cpp"
// foreach_target.h re-includes this file once per target: it must come first.
// clang-format off
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
// clang-format on

#include <cmath>
#include <cstring>

#include "base/half.h"
#include "formats/tensor_type.h"

HWY_BEFORE_NAMESPACE();
namespace pagoda::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

float DotF32(const float* a, const float* b, int n) {
    const hn::ScalableTag<float> d;
    const int N = int(hn::Lanes(d));
    auto acc0 = hn::Zero(d), acc1 = hn::Zero(d);
    int i = 0;
    for (; i + 2 * N <= n; i += 2 * N) {
        acc0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), acc0);
        acc1 = hn::MulAdd(hn::LoadU(d, a + i + N), hn::LoadU(d, b + i + N), acc1);
    }
    for (; i + N <= n; i += N) acc0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), acc0);
    float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0, acc1)));
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

// Sum of n floats with four independent accumulators (a streaming read).
float SumF32(const float* a, int64_t n) {
    const hn::ScalableTag<float> d;
    const int64_t N = int64_t(hn::Lanes(d));
    auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
    int64_t i = 0;
    for (; i + 4 * N <= n; i += 4 * N) {
        s0 = hn::Add(s0, hn::LoadU(d, a + i));
        s1 = hn::Add(s1, hn::LoadU(d, a + i + N));
        s2 = hn::Add(s2, hn::LoadU(d, a + i + 2 * N));
        s3 = hn::Add(s3, hn::LoadU(d, a + i + 3 * N));
    }
    float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
    for (; i < n; ++i) s += a[i];
    return s;
}

void AxpyF32(float alpha, const float* x, float* y, int n) {
    const hn::ScalableTag<float> d;
    const int N = int(hn::Lanes(d));
    const auto va = hn::Set(d, alpha);
    int i = 0;
    for (; i + N <= n; i += N)
        hn::StoreU(hn::MulAdd(va, hn::LoadU(d, x + i), hn::LoadU(d, y + i)), d, y + i);
    for (; i < n; ++i) y[i] += alpha * x[i];
}

void RmsNorm(const float* x, const float* w, int n, float eps, float* out) {
    const hn::ScalableTag<float> d;
    const int N = int(hn::Lanes(d));
    const float ss = DotF32(x, x, n);
    const float inv = 1.0f / std::sqrt(ss / float(n) + eps);
    const auto vi = hn::Set(d, inv);
    int i = 0;
    for (; i + N <= n; i += N)
        hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, x + i), vi), hn::LoadU(d, w + i)), d, out + i);
    for (; i < n; ++i) out[i] = x[i] * inv * w[i];
}

void SwiGlu(const float* g, const float* u, int n, float* out) {
    const hn::ScalableTag<float> d;
    const int N = int(hn::Lanes(d));
    const auto one = hn::Set(d, 1.0f);
    int i = 0;
    for (; i + N <= n; i += N) {
        const auto vg = hn::LoadU(d, g + i);
        const auto sig = hn::Div(one, hn::Add(one, hn::Exp(d, hn::Neg(vg))));
        hn::StoreU(hn::Mul(hn::Mul(vg, sig), hn::LoadU(d, u + i)), d, out + i);
    }
    for (; i < n; ++i) out[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void Softmax(float* x, int n) {
    const hn::ScalableTag<float> d;
    const int N = int(hn::Lanes(d));
    float mx = -INFINITY;
    for (int i = 0; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
    const auto vmx = hn::Set(d, mx);
    auto vsum = hn::Zero(d);
    int i = 0;
    for (; i + N <= n; i += N) {
        const auto e = hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), vmx));
        hn::StoreU(e, d, x + i);
        vsum = hn::Add(vsum, e);
    }
    float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
    for (; i < n; ++i) {
        x[i] = std::exp(x[i] - mx);
        sum += x[i];
    }
    const float inv = 1.0f / sum;
    const auto vinv = hn::Set(d, inv);
    i = 0;
    for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vinv), d, x + i);
    for (; i < n; ++i) x[i] *= inv;
}

void QuantizeQ8(const float* x, int n, int8_t* q, float* dscale) {
    const hn::CappedTag<float, 16> df;
    const hn::Rebind<int8_t, decltype(df)> d8;
    const int N = int(hn::Lanes(df));
    for (int b = 0; b < n / 32; ++b) {
        const float* xb = x + b * 32;
        auto vmax = hn::Zero(df);
        for (int j = 0; j < 32; j += N) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xb + j)));
        const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
        const float dd = amax / 127.0f;
        const auto vid = hn::Set(df, dd > 0.0f ? 1.0f / dd : 0.0f);
        for (int j = 0; j < 32; j += N) {
            const auto qi = hn::NearestInt(hn::Mul(hn::LoadU(df, xb + j), vid));
            hn::StoreU(hn::DemoteTo(d8, qi), d8, q + b * 32 + j);
        }
        dscale[b] = dd;
    }
}

// One weight row (Q8_0, repacked: int8 values, float scales) against one quantized
// activation row.
HWY_INLINE float DotQ8Row(const int8_t* wq, const float* wd, const int8_t* qx, const float* dx,
                          int nb) {
    const hn::CappedTag<int16_t, 32> d16;
    const hn::Rebind<int8_t, decltype(d16)> d8;
    const hn::Repartition<int32_t, decltype(d16)> d32;
    const hn::Rebind<float, decltype(d32)> df;
    const int N = int(hn::Lanes(d16));
    auto acc0 = hn::Zero(df), acc1 = hn::Zero(df);
    int b = 0;
    for (; b + 2 <= nb; b += 2) {  // two blocks per iteration: two independent chains
        auto s0 = hn::Zero(d32), s1 = hn::Zero(d32), t0 = hn::Zero(d32), t1 = hn::Zero(d32);
        for (int j = 0; j < 32; j += N) {
            s0 = hn::ReorderWidenMulAccumulate(
                d32, hn::PromoteTo(d16, hn::LoadU(d8, wq + b * 32 + j)),
                hn::PromoteTo(d16, hn::LoadU(d8, qx + b * 32 + j)), s0, s1);
            t0 = hn::ReorderWidenMulAccumulate(
                d32, hn::PromoteTo(d16, hn::LoadU(d8, wq + b * 32 + 32 + j)),
                hn::PromoteTo(d16, hn::LoadU(d8, qx + b * 32 + 32 + j)), t0, t1);
        }
        acc0 = hn::MulAdd(hn::ConvertTo(df, hn::Add(s0, s1)), hn::Set(df, wd[b] * dx[b]), acc0);
        acc1 = hn::MulAdd(hn::ConvertTo(df, hn::Add(t0, t1)), hn::Set(df, wd[b + 1] * dx[b + 1]),
                          acc1);
    }
    for (; b < nb; ++b) {
        auto s0 = hn::Zero(d32), s1 = hn::Zero(d32);
        for (int j = 0; j < 32; j += N) {
            s0 = hn::ReorderWidenMulAccumulate(
                d32, hn::PromoteTo(d16, hn::LoadU(d8, wq + b * 32 + j)),
                hn::PromoteTo(d16, hn::LoadU(d8, qx + b * 32 + j)), s0, s1);
        }
        acc0 = hn::MulAdd(hn::ConvertTo(df, hn::Add(s0, s1)), hn::Set(df, wd[b] * dx[b]), acc0);
    }
    return hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1)));
}

// One weight row (Q4_0, repacked: 16 bytes of nibbles per block, float scales) against
// one quantized activation row.
HWY_INLINE float DotQ4Row(const uint8_t* wq, const float* wd, const int8_t* qx, const float* dx,
                          int nb) {
    const hn::CappedTag<int16_t, 16> d16;
    const hn::RebindToUnsigned<decltype(d16)> du16;
    const hn::Rebind<uint8_t, decltype(d16)> du8;
    const hn::Rebind<int8_t, decltype(d16)> d8;
    const hn::Repartition<int32_t, decltype(d16)> d32;
    const hn::Rebind<float, decltype(d32)> df;
    const int N = int(hn::Lanes(d16));
    const auto mask = hn::Set(d16, 0x0f);
    const auto eight = hn::Set(d16, 8);
    auto acc = hn::Zero(df);
    for (int b = 0; b < nb; ++b) {
        auto s0 = hn::Zero(d32), s1 = hn::Zero(d32);
        for (int j = 0; j < 16; j += N) {
            const auto raw = hn::BitCast(d16, hn::PromoteTo(du16, hn::LoadU(du8, wq + b * 16 + j)));
            const auto lo = hn::Sub(hn::And(raw, mask), eight);
            const auto hi = hn::Sub(hn::ShiftRight<4>(raw), eight);
            s0 = hn::ReorderWidenMulAccumulate(
                d32, lo, hn::PromoteTo(d16, hn::LoadU(d8, qx + b * 32 + j)), s0, s1);
            s0 = hn::ReorderWidenMulAccumulate(
                d32, hi, hn::PromoteTo(d16, hn::LoadU(d8, qx + b * 32 + 16 + j)), s0, s1);
        }
        acc = hn::MulAdd(hn::ConvertTo(df, hn::Add(s0, s1)), hn::Set(df, wd[b] * dx[b]), acc);
    }
    return hn::GetLane(hn::SumOfLanes(df, acc));
}

// Rows [r0, r1) of a repacked quantized weight against m quantized activation rows.
// Each packed row (row_stride bytes) holds the values (int8 for Q8_0, nibbles for Q4_0)
// followed by cols/32 float scales.
void QuantRows(uint32_t type, const uint8_t* packed, size_t row_stride, int64_t rows, int64_t cols,
               const int8_t* qx, const float* dx, int m, float* y, int64_t r0, int64_t r1) {
    const int nb = int(cols / 32);
    const bool q8 = type == uint32_t(formats::TensorType::kQ8_0);
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* wr = packed + size_t(r) * row_stride;
        const float* wdr = reinterpret_cast<const float*>(wr + size_t(nb) * (q8 ? 32 : 16));
        for (int i = 0; i < m; ++i) {
            const int8_t* q = qx + size_t(i) * size_t(cols);
            const float* d = dx + size_t(i) * size_t(nb);
            y[size_t(i) * size_t(rows) + size_t(r)] =
                q8 ? DotQ8Row(reinterpret_cast<const int8_t*>(wr), wdr, q, d, nb)
                   : DotQ4Row(wr, wdr, q, d, nb);
        }
    }
}

// Converts n 16-bit floats (fp16 or bf16) to f32.
void HalfToF32(const uint16_t* in, bool bf16, int n, float* out) {
    const hn::ScalableTag<float> df;
    const int N = int(hn::Lanes(df));
    int i = 0;
    if (bf16) {
        const hn::Rebind<uint16_t, decltype(df)> du16;
        const hn::Rebind<uint32_t, decltype(df)> du32;
        for (; i + N <= n; i += N) {
            const auto u = hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, in + i)));
            hn::StoreU(hn::BitCast(df, u), df, out + i);
        }
        for (; i < n; ++i) out[i] = bf16_to_float(in[i]);
    } else {
        const hn::Rebind<hwy::float16_t, decltype(df)> dh;
        for (; i + N <= n; i += N) {
            hn::StoreU(
                hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(in + i))),
                df, out + i);
        }
        for (; i < n; ++i) out[i] = fp16_to_float(in[i]);
    }
}

// One weight row of 16-bit floats (f16 or bf16) dotted with N activation rows: each
// weight vector is converted once and used N times; two accumulators per activation
// row. Each output's operations do not depend on N (batch-invariant).
template <int N, class D>
HWY_INLINE void HalfRowDot(D df, const uint16_t* w, bool bf16, int64_t cols, const float* const* x,
                           float* out) {
    const int64_t L = int64_t(hn::Lanes(df));
    const hn::Rebind<uint16_t, D> du16;
    const hn::Rebind<uint32_t, D> du32;
    const hn::Rebind<hwy::float16_t, D> dh;
    auto load = [&](int64_t c) {
        if (bf16)
            return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, w + c))));
        return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(w + c)));
    };
    decltype(hn::Zero(df)) a0[N], a1[N];
    for (int i = 0; i < N; ++i) a0[i] = a1[i] = hn::Zero(df);
    int64_t c = 0;
    for (; c + 2 * L <= cols; c += 2 * L) {
        const auto w0 = load(c), w1 = load(c + L);
        for (int i = 0; i < N; ++i) {
            a0[i] = hn::MulAdd(w0, hn::LoadU(df, x[i] + c), a0[i]);
            a1[i] = hn::MulAdd(w1, hn::LoadU(df, x[i] + c + L), a1[i]);
        }
    }
    for (int i = 0; i < N; ++i) {
        float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(a0[i], a1[i])));
        for (int64_t k = c; k < cols; ++k)
            s += (bf16 ? bf16_to_float(w[k]) : fp16_to_float(w[k])) * x[i][k];
        out[i] = s;
    }
}

// y[i][r] for rows [r0, r1) of a [rows][cols] 16-bit matrix, m activation rows, in
// groups of up to 4 activation rows over tiles of 16 weight rows (the tile stays in L2
// while the groups pass over it).
void HalfRows(const uint16_t* w, bool bf16, int64_t rows, int64_t cols, const float* x, int m,
              float* y, int64_t r0, int64_t r1) {
    const hn::ScalableTag<float> df;
    constexpr int64_t kTile = 16;
    for (int64_t t0 = r0; t0 < r1; t0 += kTile) {
        const int64_t t1 = std::min(r1, t0 + kTile);
        for (int i0 = 0; i0 < m; i0 += 4) {
            const int n = std::min(4, m - i0);
            const float* xs[4];
            for (int i = 0; i < n; ++i) xs[i] = x + size_t(i0 + i) * size_t(cols);
            for (int64_t r = t0; r < t1; ++r) {
                const uint16_t* wr = w + size_t(r) * size_t(cols);
                float out[4];
                switch (n) {
                    case 4: HalfRowDot<4>(df, wr, bf16, cols, xs, out); break;
                    case 3: HalfRowDot<3>(df, wr, bf16, cols, xs, out); break;
                    case 2: HalfRowDot<2>(df, wr, bf16, cols, xs, out); break;
                    default: HalfRowDot<1>(df, wr, bf16, cols, xs, out); break;
                }
                for (int i = 0; i < n; ++i) y[size_t(i0 + i) * size_t(rows) + size_t(r)] = out[i];
            }
        }
    }
}

const char* TargetHere() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace pagoda::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/cpu/simd_dispatch.h"

namespace pagoda::kernels::cpu {
HWY_EXPORT(DotF32);
HWY_EXPORT(AxpyF32);
HWY_EXPORT(SumF32);
HWY_EXPORT(RmsNorm);
HWY_EXPORT(SwiGlu);
HWY_EXPORT(Softmax);
HWY_EXPORT(QuantizeQ8);
HWY_EXPORT(QuantRows);
HWY_EXPORT(HalfToF32);
HWY_EXPORT(HalfRows);
HWY_EXPORT(TargetHere);

float dot_f32(const float* a, const float* b, int n) {
    return HWY_DYNAMIC_DISPATCH(DotF32)(a, b, n);
}
float sum_f32(const float* a, int64_t n) { return HWY_DYNAMIC_DISPATCH(SumF32)(a, n); }
void axpy_f32(float a, const float* x, float* y, int n) {
    HWY_DYNAMIC_DISPATCH(AxpyF32)(a, x, y, n);
}
void rmsnorm(const float* x, const float* w, int n, float eps, float* out) {
    HWY_DYNAMIC_DISPATCH(RmsNorm)(x, w, n, eps, out);
}
void swiglu(const float* g, const float* u, int n, float* out) {
    HWY_DYNAMIC_DISPATCH(SwiGlu)(g, u, n, out);
}
void softmax(float* x, int n) { HWY_DYNAMIC_DISPATCH(Softmax)(x, n); }
void quantize_q8(const float* x, int n, int8_t* q, float* d) {
    HWY_DYNAMIC_DISPATCH(QuantizeQ8)(x, n, q, d);
}
void quant_rows(uint32_t type, const uint8_t* packed, size_t row_stride, int64_t rows, int64_t cols,
                const int8_t* qx, const float* dx, int m, float* y, int64_t r0, int64_t r1) {
    HWY_DYNAMIC_DISPATCH(QuantRows)(type, packed, row_stride, rows, cols, qx, dx, m, y, r0, r1);
}
void half_to_f32(const uint16_t* in, bool bf16, int n, float* out) {
    HWY_DYNAMIC_DISPATCH(HalfToF32)(in, bf16, n, out);
}
void half_rows(const uint16_t* w, bool bf16, int64_t rows, int64_t cols, const float* x, int m,
               float* y, int64_t r0, int64_t r1) {
    HWY_DYNAMIC_DISPATCH(HalfRows)(w, bf16, rows, cols, x, m, y, r0, r1);
}
const char* simd_target_name() { return HWY_DYNAMIC_DISPATCH(TargetHere)(); }
}  // namespace pagoda::kernels::cpu
#endif
