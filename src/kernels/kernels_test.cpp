// Every optimised kernel against its reference, at a stated tolerance.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <thread>
#include <tuple>

#include "base/half.h"
#include "kernels/cpu/attention_bf16.h"
#include "kernels/cpu/half_panels.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant_vnni.h"
#include "kernels/cpu/simd_dispatch.h"
#include "kernels/ref/ops.h"

namespace pagoda::kernels {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

// Max |a-b| / max|b| over the arrays.
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0, den = 1e-30;
    for (size_t i = 0; i < a.size(); ++i) {
        num = std::max(num, double(std::fabs(a[i] - b[i])));
        den = std::max(den, double(std::fabs(b[i])));
    }
    return num / den;
}

std::vector<uint8_t> make_weights(TensorType t, int64_t rows, int64_t cols, uint32_t seed) {
    const auto f = randn(size_t(rows * cols), seed, 0.5f);
    std::vector<uint8_t> out;
    switch (t) {
        case TensorType::kF32:
            out.resize(f.size() * 4);
            std::memcpy(out.data(), f.data(), out.size());
            break;
        case TensorType::kF16:
        case TensorType::kBF16: {
            out.resize(f.size() * 2);
            auto* p = reinterpret_cast<uint16_t*>(out.data());
            for (size_t i = 0; i < f.size(); ++i)
                p[i] = t == TensorType::kF16 ? float_to_fp16(f[i]) : float_to_bf16(f[i]);
            break;
        }
        case TensorType::kQ8_0:
        case TensorType::kQ4_0: {
            const bool q8 = t == TensorType::kQ8_0;
            const size_t bb = q8 ? 34 : 18;
            out.resize(f.size() / 32 * bb);
            std::mt19937 rng(seed);
            for (size_t b = 0; b < f.size() / 32; ++b) {
                uint8_t* p = out.data() + b * bb;
                const uint16_t d = float_to_fp16(q8 ? 0.01f : 0.05f);
                std::memcpy(p, &d, 2);
                for (size_t j = 0; j < bb - 2; ++j) p[2 + j] = uint8_t(rng());
            }
            break;
        }
        case TensorType::kQ4_K:
        case TensorType::kQ5_K:
        case TensorType::kQ6_K: {  // random quants and sub-block scales, sane fp16 scales
            const size_t bb = formats::tensor_type_traits(uint32_t(t))->block_bytes;
            out.resize(f.size() / 256 * bb);
            std::mt19937 rng(seed);
            for (auto& v : out) v = uint8_t(rng());
            for (size_t b = 0; b < f.size() / 256; ++b) {
                uint8_t* p = out.data() + b * bb;
                const uint16_t d = float_to_fp16(t == TensorType::kQ6_K ? 0.0005f : 0.002f),
                               dmin = float_to_fp16(0.004f);
                std::memcpy(t == TensorType::kQ6_K ? p + 208 : p, &d, 2);
                if (t != TensorType::kQ6_K) std::memcpy(p + 2, &dmin, 2);
            }
            break;
        }
        default: break;
    }
    return out;
}

bool is_quant(TensorType t) {
    return t == TensorType::kQ8_0 || t == TensorType::kQ4_0 || formats::is_k_quant(t);
}

// The K-quant block layouts, dequantized by the reference, against values worked out by
// hand from ggml's documented layouts (one weight per type, every field involved).
TEST(Kernels, KQuantReferenceMatchesHandComputedValues) {
    {  // Q4_K weight 163: sub-block 5 (high nibbles of chunk 2, l = 3); sc 37, m 50
        std::vector<uint8_t> blk(144, 0);
        const uint16_t d = 0x3C00, dmin = 0x3800;  // 1.0, 0.5
        std::memcpy(blk.data(), &d, 2);
        std::memcpy(blk.data() + 2, &dmin, 2);
        uint8_t* sc = blk.data() + 4;
        sc[9] = (37 & 15) | ((50 & 15) << 4);  // low bits of sc and m of sub-block 5
        sc[1] = uint8_t((37 >> 4) << 6);       // high bits of sc_5 in scales[1]
        sc[5] = uint8_t((50 >> 4) << 6);       // high bits of m_5 in scales[5]
        blk[16 + 64 + 3] = 0xA0;               // q = 10
        const WeightView w{TensorType::kQ4_K, 1, 256, blk.data()};
        std::vector<float> out(256);
        ref::dequantize_row(w, 0, out.data());
        EXPECT_EQ(out[163], 1.0f * 37 * 10 - 0.5f * 50);  // 345
        EXPECT_EQ(out[131], 0.0f);    // same byte's low nibble (sub-block 4: sc 0, m 0)
        EXPECT_EQ(out[162], -25.0f);  // q 0 in sub-block 5: the min alone
    }
    {  // Q5_K weight 100: chunk 1, high nibble of qs[36], fifth bit = bit 3 of qh[4]
        std::vector<uint8_t> blk(176, 0);
        const uint16_t d = 0x3400, dmin = 0x3C00;  // 0.25, 1.0
        std::memcpy(blk.data(), &d, 2);
        std::memcpy(blk.data() + 2, &dmin, 2);
        blk[4 + 3] = 20;  // sc of sub-block 3
        blk[4 + 7] = 6;   // m of sub-block 3
        blk[16 + 4] = 0x08;
        blk[48 + 36] = 0xB0;
        const WeightView w{TensorType::kQ5_K, 1, 256, blk.data()};
        std::vector<float> out(256);
        ref::dequantize_row(w, 0, out.data());
        EXPECT_EQ(out[100], 0.25f * 20 * 27 - 1.0f * 6);  // q = 11 + 16: 129
        EXPECT_EQ(out[68], 0.0f);   // same byte's low nibble: sub-block 2 (sc 0, m 0)
        EXPECT_EQ(out[99], -6.0f);  // sub-block 3, q 0: the min alone
    }
    {  // Q6_K weight 200: half 1, l = 8 of the third quarter: high nibble of ql[72],
       // bits 4-5 of qh[40]; scale 200 / 16 = 12
        std::vector<uint8_t> blk(210, 0);
        const uint16_t d = 0x3800;  // 0.5
        std::memcpy(blk.data() + 208, &d, 2);
        blk[72] = 0x70;        // low four bits 7
        blk[128 + 40] = 0x20;  // high two bits 2: q = 39
        blk[192 + 12] = uint8_t(int8_t(-3));
        const WeightView w{TensorType::kQ6_K, 1, 256, blk.data()};
        std::vector<float> out(256);
        ref::dequantize_row(w, 0, out.data());
        EXPECT_EQ(out[200], 0.5f * -3 * (39 - 32));  // -10.5
        EXPECT_EQ(out[201], 0.5f * -3 * -32);        // q 0: 48
        EXPECT_EQ(out[0], 0.0f);                     // scale 0
    }
}

// The K-quant VNNI kernels compute exact integer dots of the weights' quants with the
// 8-bit activations: against the reference on the dequantized activations they agree to
// float rounding. Shapes: two super-blocks, row counts around the 32-row
// panel, activation rows around the 4- and 6-row passes.
TEST(Kernels, KQuantKernelsEqualReferenceOnQuantizedActivations) {
    if (!cpu::have_avx512_vnni()) GTEST_SKIP() << "no AVX-512 VNNI: K-quants run dequantized";
    for (TensorType type : {TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K}) {
        for (int64_t rows : {16, 40, 70}) {
            SCOPED_TRACE(formats::tensor_type_name(type) + " rows " + std::to_string(rows));
            const int64_t cols = 512;
            const auto wbytes = make_weights(type, rows, cols, 9);
            const WeightView w{type, rows, cols, wbytes.data()};
            auto mm = cpu::QuantMatmul::create(w);
            ASSERT_TRUE(mm.ok()) << mm.error().message;
            for (int m : {1, 3, 4, 6, 7, 13}) {
                const auto x = randn(size_t(m * cols), 6);
                std::vector<float> xq(x.size()), want(size_t(m * rows)),
                    got(want.size() + 64, -7.0f);
                std::vector<int8_t> q(static_cast<size_t>(cols));
                std::vector<float> d(static_cast<size_t>(cols / 32));
                for (int i = 0; i < m; ++i) {
                    cpu::quantize_q8(x.data() + i * cols, int(cols), q.data(), d.data());
                    for (int64_t c = 0; c < cols; ++c)
                        xq[size_t(i * cols + c)] = d[size_t(c / 32)] * float(q[size_t(c)]);
                }
                ref::matmul(w, xq.data(), m, want.data());
                (*mm)->run(x.data(), m, got.data());
                for (size_t i = want.size(); i < got.size(); ++i)
                    ASSERT_EQ(got[i], -7.0f) << "wrote past y";
                got.resize(want.size());
                EXPECT_LT(rel_err(got, want), 1e-5) << "m " << m;
            }
        }
    }
}

class MatmulVsRef : public ::testing::TestWithParam<std::tuple<TensorType, int>> {};

// Q8_0 and Q4_0 on this CPU may take the AVX-512 VNNI path; check the portable Highway
// path too, and that the two agree to float rounding (same integer dots, same scales).
// Shapes: an odd block count, row counts that fill no 32-row panel or a panel and a
// half (the tail rows are padding that must not be written), and activation row counts
// around the kernel's 6-row pass.
TEST(Kernels, QuantPortableAndVnniPathsAgree) {
    for (auto [type, rows] : {std::pair{TensorType::kQ8_0, 40},
                              {TensorType::kQ8_0, 16},
                              {TensorType::kQ8_0, 70},
                              {TensorType::kQ4_0, 40},
                              {TensorType::kQ4_0, 70}}) {
        SCOPED_TRACE(formats::tensor_type_name(type));
        const int64_t cols = 32 * 7;
        const auto wbytes = make_weights(type, rows, cols, 5);
        const WeightView w{type, rows, cols, wbytes.data()};
        for (int m : {1, 3, 6, 7, 13}) {
            const auto x = randn(size_t(m * cols), 6);
            std::vector<float> want(size_t(m * rows)), fast(want.size() + 64, -7.0f),
                portable(want.size());
            ref::matmul(w, x.data(), m, want.data());
            cpu::matmul(w, x.data(), m, fast.data());
            cpu::set_force_portable_kernels(true);
            cpu::matmul(w, x.data(), m, portable.data());
            cpu::set_force_portable_kernels(false);
            for (size_t i = want.size(); i < fast.size(); ++i)
                ASSERT_EQ(fast[i], -7.0f) << "wrote past y, rows " << rows;
            fast.resize(want.size());
            EXPECT_LT(rel_err(fast, want), 2e-2) << rows << "x" << m;
            EXPECT_LT(rel_err(portable, want), 2e-2) << rows << "x" << m;
            EXPECT_LT(rel_err(fast, portable), 1e-5) << rows << "x" << m;
        }
    }
}

// F16/BF16: the AVX-512 16-row panels and the portable row kernel against the
// reference, with row counts that leave a partial panel (the padding must not be written)
// and batches around the 6-row pass.
// x with every value rounded to bf16 (what the AVX512_BF16 kernel multiplies).
std::vector<float> round_bf16(std::vector<float> x) {
    for (float& v : x) v = bf16_to_float(float_to_bf16(v));
    return x;
}

// The optimised F16/BF16 kernels against the reference: f32 activations (F16, and BF16
// without AVX512_BF16: 1e-5), bf16-rounded activations for the BF16 pair panels (1e-5
// against the reference on the same rounded activations); the portable rows always f32.
TEST(Kernels, HalfPanelsAndRowsAgree) {
    for (TensorType type : {TensorType::kF16, TensorType::kBF16}) {
        for (int64_t rows : {16, 40, 70}) {
            for (int64_t cols : {96, 45}) {
                SCOPED_TRACE(formats::tensor_type_name(type) + " rows " + std::to_string(rows) +
                             " cols " + std::to_string(cols));
                const bool bf16dot = type == TensorType::kBF16 && cpu::have_avx512_bf16();
                const auto wbytes = make_weights(type, rows, cols, 13);
                const WeightView w{type, rows, cols, wbytes.data()};
                auto fast = cpu::DenseMatmul::create(w);
                cpu::set_force_portable_kernels(true);
                auto portable = cpu::DenseMatmul::create(w);
                cpu::set_force_portable_kernels(false);
                ASSERT_TRUE(fast.ok() && portable.ok());
                for (int m : {1, 5, 6, 13}) {
                    const auto x = randn(size_t(m * cols), 2);
                    std::vector<float> want(size_t(m * rows)), want_fast(want.size()),
                        a(want.size() + 64, -7.0f), b(want.size());
                    ref::matmul(w, x.data(), m, want.data());
                    ref::matmul(w, (bf16dot ? round_bf16(x) : x).data(), m, want_fast.data());
                    (*fast)->run(x.data(), m, a.data());
                    (*portable)->run(x.data(), m, b.data());
                    for (size_t i = want.size(); i < a.size(); ++i) ASSERT_EQ(a[i], -7.0f);
                    a.resize(want.size());
                    EXPECT_LT(rel_err(a, want_fast), 1e-5) << "m " << m;
                    EXPECT_LT(rel_err(b, want), 1e-5) << "m " << m;
                    if (bf16dot) {
                        EXPECT_LT(rel_err(a, want), 1e-2) << "m " << m;  // the rounding only
                    }
                }
            }
        }
    }
}

TEST_P(MatmulVsRef, Matches) {
    const auto [type, m] = GetParam();
    const int64_t rows = 96, cols = 256;
    const auto wbytes = make_weights(type, rows, cols, 7);
    const WeightView w{type, rows, cols, wbytes.data()};
    const auto x = randn(size_t(m * cols), 11);
    std::vector<float> want(static_cast<size_t>(m * rows)), got(size_t(m * rows));
    ref::matmul(w, x.data(), m, want.data());
    if (is_quant(type)) {
        cpu::matmul(w, x.data(), m, got.data());
        // Activations are quantized to 8 bits per 32-block (per 256 for K-quants): ~1%
        // relative error.
        EXPECT_LT(rel_err(got, want), 2e-2);
    } else {
        auto mm = cpu::DenseMatmul::create(w);
        ASSERT_TRUE(mm.ok()) << mm.error().message;
        (*mm)->run(x.data(), m, got.data());
        // f32 activations (bf16-rounded for BF16 with AVX512_BF16); f32/f16/bf16 weights
        // exact in f32.
        if (type == TensorType::kBF16 && cpu::have_avx512_bf16())
            ref::matmul(w, round_bf16(x).data(), m, want.data());
        EXPECT_LT(rel_err(got, want), 1e-5);
    }
}

// Each output row must not depend on how many rows share the call (batch invariance of
// greedy decoding): m = 1 row by row equals one call with m = 9, bit for bit.
class MatmulRowInvariance : public ::testing::TestWithParam<TensorType> {};

TEST_P(MatmulRowInvariance, RowsIndependentOfBatch) {
    const TensorType type = GetParam();
    const int64_t rows = 64, cols = formats::is_k_quant(type) ? 256 * 3 : 32 * 9;
    if (formats::is_k_quant(type) && !cpu::have_avx512_vnni()) GTEST_SKIP() << "no VNNI";
    const auto wbytes = make_weights(type, rows, cols, 3);
    const WeightView w{type, rows, cols, wbytes.data()};
    const int m = 9;
    const auto x = randn(size_t(m * cols), 4);
    std::vector<float> batched(size_t(m * rows)), single(size_t(m * rows));
    if (is_quant(type)) {
        auto mm = cpu::QuantMatmul::create(w);
        ASSERT_TRUE(mm.ok());
        (*mm)->run(x.data(), m, batched.data());
        for (int i = 0; i < m; ++i)
            (*mm)->run(x.data() + size_t(i) * cols, 1, single.data() + size_t(i) * rows);
    } else {
        auto mm = cpu::DenseMatmul::create(w);
        ASSERT_TRUE(mm.ok());
        (*mm)->run(x.data(), m, batched.data());
        for (int i = 0; i < m; ++i)
            (*mm)->run(x.data() + size_t(i) * cols, 1, single.data() + size_t(i) * rows);
    }
    for (size_t i = 0; i < batched.size(); ++i) ASSERT_EQ(batched[i], single[i]) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulRowInvariance,
                         ::testing::Values(TensorType::kF32, TensorType::kF16, TensorType::kBF16,
                                           TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_K,
                                           TensorType::kQ5_K, TensorType::kQ6_K));

INSTANTIATE_TEST_SUITE_P(Types, MatmulVsRef,
                         ::testing::Combine(::testing::Values(TensorType::kF32, TensorType::kF16,
                                                              TensorType::kBF16, TensorType::kQ8_0,
                                                              TensorType::kQ4_0, TensorType::kQ4_K,
                                                              TensorType::kQ5_K, TensorType::kQ6_K),
                                            ::testing::Values(1, 3, 17)));

TEST(Kernels, ElementwiseMatchReference) {
    const int n = 203;
    const auto x = randn(n, 1), w = randn(n, 2), g = randn(n, 3, 3.0f), u = randn(n, 4);
    std::vector<float> a(n), b(n);
    ref::rmsnorm(x.data(), w.data(), n, 1e-5f, a.data());
    cpu::rmsnorm(x.data(), w.data(), n, 1e-5f, b.data());
    EXPECT_LT(rel_err(b, a), 1e-5);
    ref::swiglu(g.data(), u.data(), n, a.data());
    cpu::swiglu(g.data(), u.data(), n, b.data());
    EXPECT_LT(rel_err(b, a), 1e-5);
    a = randn(n, 5, 4.0f);
    b = a;
    ref::softmax(a.data(), n);
    cpu::softmax(b.data(), n);
    EXPECT_LT(rel_err(b, a), 1e-5);
    EXPECT_NEAR(
        cpu::sum_f32(x.data(), n),
        [&] {
            double s = 0;
            for (int i = 0; i < n; ++i) s += x[size_t(i)];
            return s;
        }(),
        1e-4);
    EXPECT_NEAR(
        cpu::dot_f32(x.data(), w.data(), n),
        [&] {
            double s = 0;
            for (int i = 0; i < n; ++i) s += double(x[size_t(i)]) * w[size_t(i)];
            return s;
        }(),
        1e-4);
}

// A q4_0 KV row is GGUF's block_q4_0 as the weight quantizer writes it; its values read
// back as the GGUF weight dequantizer reads them (fp16(d) * (q - 8): byte j holds value j
// low, j + 16 high), the value of largest magnitude exactly, every value within half a
// step, and an all-zero block as zeros.
TEST(Kernels, KvQ4ValuesAreTheGgufDequantizersValues) {
    const int kvh = 2, hd = 96, n = kvh * hd;
    auto x = randn(size_t(n), 21, 3.0f);
    for (int i = 32; i < 64; ++i) x[size_t(i)] = 0.0f;  // an all-zero block: scale 0
    std::vector<uint8_t> kpool(size_t(kvh) * kv_row_bytes(KvDtype::kQ4_0, hd)), vpool(kpool.size());
    const PagedKv kv{kpool.data(), vpool.data(), KvDtype::kQ4_0, 1, kvh, hd};
    kv_quant_write(kv, 0, 0, x.data(), x.data());
    std::vector<uint8_t> want(kpool.size());
    ref::quantize_row(TensorType::kQ4_0, x.data(), n, want.data());
    EXPECT_EQ(kpool, want);
    std::vector<float> deq(x.size());
    ref::dequantize_row(WeightView{TensorType::kQ4_0, 1, n, want.data()}, 0, deq.data());
    for (int b = 0; b < n / 32; ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[size_t(b * 32 + j)]));
        for (int j = 0; j < 32; ++j) {
            const int i = b * 32 + j;
            const float v = kv_quant_value(KvDtype::kQ4_0, kpool.data(), i);
            EXPECT_EQ(v, deq[size_t(i)]) << i;
            EXPECT_LE(std::fabs(v - x[size_t(i)]), amax / 16 + 1e-3f * amax) << i;
            if (std::fabs(x[size_t(i)]) == amax) {
                EXPECT_NEAR(v, x[size_t(i)], 1e-3f * amax) << i;
            }
        }
    }
    EXPECT_EQ(kv_quant_value(KvDtype::kQ4_0, kpool.data(), 40), 0.0f);
}

TEST(Kernels, QuantizeQ8MatchesReferenceQuantizer) {
    const auto x = randn(32 * 9, 12, 3.0f);
    std::vector<int8_t> q(x.size());
    std::vector<float> d(9);
    cpu::quantize_q8(x.data(), int(x.size()), q.data(), d.data());
    std::vector<uint8_t> want(9 * 34);
    ref::quantize_row(TensorType::kQ8_0, x.data(), int64_t(x.size()), want.data());
    for (int b = 0; b < 9; ++b) {
        const auto* blk = reinterpret_cast<const formats::BlockQ8_0*>(want.data()) + b;
        EXPECT_NEAR(d[size_t(b)], fp16_to_float(blk->d), 1e-3f * d[size_t(b)]);
        for (int j = 0; j < 32; ++j)
            EXPECT_NEAR(q[size_t(b * 32 + j)], blk->qs[j], 1) << b << " " << j;
    }
}

TEST(Kernels, RopeMatchesReference) {
    for (RopeStyle style : {RopeStyle::kNormal, RopeStyle::kNeox}) {
        RopeParams p{.style = style, .rot_dim = 64, .freq_base = 500000.0f, .freq_scale = 0.5f};
        auto a = randn(4 * 64, 9), b = a;
        ref::rope(a.data(), 4, 64, 1234, p);
        cpu::rope(b.data(), 4, 64, 1234, p);
        EXPECT_LT(rel_err(b, a), 1e-6);
    }
}

// A paged KV layer filled with `len` random positions through kv_write, its blocks
// scattered over the pool (a table walking it backwards). The slots never written hold NaN
// (all-ones bytes in every dtype): a kernel that lets one into an output fails.
struct KvFixture {
    std::vector<uint8_t> kpool, vpool;
    std::vector<int32_t> table;
    PagedKv kv;
    KvFixture(KvDtype dtype, int bs, int kvh, int hd, int len) {
        const int n_blocks = (len + bs - 1) / bs + 1;
        kpool.assign(size_t(n_blocks * bs * kvh) * kv_row_bytes(dtype, hd), 0xFF);
        vpool.assign(kpool.size(), 0xFF);
        kv = PagedKv{kpool.data(), vpool.data(), dtype, bs, kvh, hd};
        for (int b = 0; b < n_blocks; ++b) table.push_back(n_blocks - 1 - b);
        for (int p = 0; p < len; ++p) {
            auto k = randn(size_t(kvh * hd), uint32_t(100 + p), 2.0f),
                 v = randn(size_t(kvh * hd), uint32_t(900 + p));
            cpu::kv_write(kv, table.data(), p, k.data(), v.data());
        }
    }
};

// The flash kernel against the plain two-pass reference: a prefill chunk that starts
// mid-tile and crosses several 64-key tiles, plus decode rows, over scattered blocks, for
// every KV dtype and block size, GQA groups of 1, 3 and 8, head sizes below, at and above
// the SIMD width. Tolerance 1e-5 relative (f32 sums in another order, online softmax);
// the bf16 dot products of a bf16 pool (AVX512_BF16 CPUs) are held to their own bound.
class AttentionVsRef : public ::testing::TestWithParam<std::tuple<KvDtype, int>> {};

TEST_P(AttentionVsRef, Matches) {
    const auto [dtype, bs] = GetParam();
    struct Shape {
        int kvh, heads, hd;
    };
    std::vector<Shape> shapes = {{2, 6, 16}, {1, 8, 64}, {2, 2, 8}, {1, 3, 80}};
    if (kv_quantized(dtype)) shapes = {{2, 6, 32}, {1, 8, 64}, {1, 3, 128}};  // 32-blocks
    for (const Shape sh : shapes) {
        const int len0 = 150, len1 = 90, rows0 = 83;
        KvFixture f0(dtype, bs, sh.kvh, sh.hd, len0), f1(dtype, bs, sh.kvh, sh.hd, len1);
        const int W = sh.heads * sh.hd;
        const AttentionShape shape{sh.heads, 0.25f, W, W};
        const auto q = randn(size_t((rows0 + 2) * W), 3);
        std::vector<float> want(q.size()), got(q.size());
        // Sequence 0: rows 67..149 (a prefill chunk); sequence 1: two decode-like rows.
        std::vector<AttentionSeq> seqs = {{f0.table.data(), rows0, len0 - rows0},
                                          {f1.table.data(), 2, len1 - 2}};
        ref::paged_attention(f0.kv, shape, seqs[0], q.data(), want.data());
        ref::paged_attention(f1.kv, shape, seqs[1], q.data() + size_t(rows0 * W),
                             want.data() + size_t(rows0 * W));
        // Both sequences read their own pool: run them as two calls of the batch kernel.
        cpu::paged_attention_batch(f0.kv, shape, {seqs[0]}, {0}, q.data(), got.data());
        cpu::paged_attention_batch(f1.kv, shape, {seqs[1]}, {0}, q.data() + size_t(rows0 * W),
                                   got.data() + size_t(rows0 * W));
        if (kv_quantized(dtype)) {
            // The kernel reads the values the reference reads (fp16 scale x int8 or int4):
            // within 1e-5 of it; the cache's own error against f32 under 5e-2 for q8_0
            // (measured 2.2-2.8% on these random rows, keys x2 and a sharp softmax; bf16's is
            // 0.7-1%) and 0.5 for q4_0 (measured 19-42%, 16 times q8_0's step).
            EXPECT_LT(rel_err(got, want), 1e-5) << sh.kvh << " " << sh.heads << " " << sh.hd;
            KvFixture e0(KvDtype::kF32, bs, sh.kvh, sh.hd, len0);
            std::vector<float> exact(size_t(rows0 * W));
            ref::paged_attention(e0.kv, shape, {e0.table.data(), rows0, len0 - rows0}, q.data(),
                                 exact.data());
            const std::vector<float> got0(got.begin(), got.begin() + rows0 * W);
            EXPECT_LT(rel_err(got0, exact), dtype == KvDtype::kQ8_0 ? 5e-2 : 0.5) << sh.hd;
            EXPECT_GT(rel_err(got0, exact), dtype == KvDtype::kQ8_0 ? 1e-4 : 5e-2)
                << "the values equal f32 ones: not quantized (or not to its width)";
            continue;
        }
        if (dtype != KvDtype::kBF16 || !cpu::attn_bf16::usable(sh.hd)) {
            EXPECT_LT(rel_err(got, want), 1e-5) << sh.kvh << " " << sh.heads << " " << sh.hd;
            continue;
        }
        // The vdpbf16ps path rounds the queries and probabilities to bf16: its error against
        // the exact reference must stay within 1e-2 and near the error the bf16 cache itself
        // makes (the same attention over an f32 pool of the same values).
        KvFixture e0(KvDtype::kF32, bs, sh.kvh, sh.hd, len0),
            e1(KvDtype::kF32, bs, sh.kvh, sh.hd, len1);
        std::vector<float> exact(q.size());
        ref::paged_attention(e0.kv, shape, {e0.table.data(), rows0, len0 - rows0}, q.data(),
                             exact.data());
        ref::paged_attention(e1.kv, shape, {e1.table.data(), 2, len1 - 2},
                             q.data() + size_t(rows0 * W), exact.data() + size_t(rows0 * W));
        // Measured: 0.32-0.67% added to the cache's 0.69-0.95%.
        EXPECT_LT(rel_err(got, want), 1e-2) << sh.kvh << " " << sh.heads << " " << sh.hd;
        EXPECT_LT(rel_err(got, want), 1.5 * rel_err(want, exact)) << sh.hd;
        EXPECT_GT(rel_err(got, want), 1e-4) << "the vdpbf16ps path did not run (f32 sums: 1e-5)";
    }
}

INSTANTIATE_TEST_SUITE_P(Layouts, AttentionVsRef,
                         ::testing::Combine(::testing::Values(KvDtype::kF32, KvDtype::kF16,
                                                              KvDtype::kBF16, KvDtype::kQ8_0,
                                                              KvDtype::kQ4_0),
                                            ::testing::Values(8, 16, 48, 128)));

// A query's output does not depend on the rows computed with it or on the block size: a
// 130-row prefill equals, bit for bit, each row computed alone (as a decode step at its
// position) and the same prefill over a pool with another block size. So the last row of
// a prompt equals the decode step that would follow, and a KV re-layout keeps outputs.
// f16 blocks of 16 and 48 are gathered; f32 blocks of 16 are read in place, of 8 gathered;
// bf16 blocks take the vdpbf16ps path where the CPU has it (blocks of 8 split every chunk
// of 16 keys: gathered key by key); q8_0 rows are dequantized as they are gathered.
TEST(Kernels, AttentionRowsAreIndependentOfBatchAndBlockSize) {
    const int kvh = 2, heads = 6, hd = 64, len = 130, W = heads * hd;  // groups of 3
    const AttentionShape shape{heads, 0.125f, W, W};
    const auto q = randn(size_t(len * W), 5);
    for (const auto& [dtype, bs_a, bs_b] :
         {std::tuple{KvDtype::kF16, 16, 48}, std::tuple{KvDtype::kF32, 16, 8},
          std::tuple{KvDtype::kBF16, 16, 48}, std::tuple{KvDtype::kBF16, 8, 16},
          std::tuple{KvDtype::kQ8_0, 16, 48}, std::tuple{KvDtype::kQ8_0, 8, 128},
          std::tuple{KvDtype::kQ4_0, 16, 48}, std::tuple{KvDtype::kQ4_0, 8, 128}}) {
        KvFixture a(dtype, bs_a, kvh, hd, len), b(dtype, bs_b, kvh, hd, len);
        std::vector<float> all(q.size()), other(q.size()), one(static_cast<size_t>(W));
        cpu::paged_attention(a.kv, shape, {a.table.data(), len, 0}, q.data(), all.data());
        cpu::paged_attention(b.kv, shape, {b.table.data(), len, 0}, q.data(), other.data());
        ASSERT_EQ(all, other) << bs_a << " " << bs_b;
        for (int r : {0, 1, 63, 64, 65, 100, 129}) {
            cpu::paged_attention(a.kv, shape, {a.table.data(), 1, r}, q.data() + size_t(r * W),
                                 one.data());
            for (int i = 0; i < W; ++i)
                ASSERT_EQ(one[size_t(i)], all[size_t(r * W + i)]) << r << " " << i;
        }
    }
}

// OpenMP keeps the thread count per thread: --threads set on the main thread must reach
// the engine thread (it once did not: `--threads 1` still ran the engine on every CPU).
TEST(Kernels, ThreadCountReachesOtherThreads) {
    const int before = cpu::num_threads();
    cpu::set_num_threads(1);
    int seen = 0, in_region = 0;
    std::thread([&] {
        cpu::adopt_num_threads();
        seen = cpu::num_threads();
#pragma omp parallel
        {
#pragma omp single
            in_region = omp_get_num_threads();
        }
    }).join();
    cpu::set_num_threads(before);
    EXPECT_EQ(seen, 1);
    EXPECT_EQ(in_region, 1);
}

}  // namespace
}  // namespace pagoda::kernels
