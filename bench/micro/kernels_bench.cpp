// Google Benchmark programs for the CPU kernels, with sizes named after real models
// (TinyLlama-1.1B: dim 2048, ffn 5632, 32 heads of 64, 4 KV heads). Benchmarks report
// items/bytes per second; they never assert. Also the machine limits the performance
// report divides by: memory read bandwidth and the oneDNN matmul peaks.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "base/half.h"
#include "base/huge_buffer.h"
#include "kernels/cpu/ops.h"
#include "kernels/ref/ops.h"

namespace pagoda::kernels {
namespace {

std::vector<float> randn(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

std::vector<uint8_t> weights(TensorType t, int64_t rows, int64_t cols) {
    const auto tr = formats::tensor_type_traits(uint32_t(t));
    std::vector<uint8_t> out(size_t(rows * cols) / tr->block_elems * tr->block_bytes);
    const auto row = randn(size_t(cols), 1);
    for (int64_t r = 0; r < rows; ++r)
        ref::quantize_row(t, row.data(), cols,
                          out.data() + size_t(r) * (out.size() / size_t(rows)));
    return out;
}

// Memory read bandwidth: sum a buffer far larger than the caches, on every thread.
// arg 0: sum with four accumulators; arg 1: dot product of the buffer with itself.
// The performance report takes the faster as the machine's read bandwidth.
void BM_MemoryReadBandwidth(benchmark::State& state) {
    const size_t n = size_t(1) << 28;  // 1 GiB of floats, far beyond the caches
    // Huge pages, like the weights and KV cache: this measures DRAM, not TLB misses.
    HugeBuffer mem = std::move(HugeBuffer::allocate(n * sizeof(float)).value());
    float* buf = mem.as<float>();
    std::fill(buf, buf + n, 1.0f);
    const int chunks = 64;
    const bool dot = state.range(0) == 1;
    for (auto _ : state) {
        double total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
        for (int c = 0; c < chunks; ++c) {
            const float* p = buf + size_t(c) * (n / chunks);
            total +=
                dot ? cpu::dot_f32(p, p, int(n / chunks)) : cpu::sum_f32(p, int64_t(n / chunks));
        }
        benchmark::DoNotOptimize(total);
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n * 4));
}
BENCHMARK(BM_MemoryReadBandwidth)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// Matmul y[M][N] = x[M][K] W^T. args: type, M, N, K. items = FLOPs (2*M*N*K).
void BM_Matmul(benchmark::State& state) {
    const auto t = TensorType(state.range(0));
    const int m = int(state.range(1));
    const int64_t n = state.range(2), k = state.range(3);
    const auto w = weights(t, n, k);
    const WeightView view{t, n, k, w.data()};
    const auto x = randn(size_t(m * k), 2);
    std::vector<float> y(static_cast<size_t>(m * n));
    std::unique_ptr<cpu::DenseMatmul> dense;
    std::unique_ptr<cpu::QuantMatmul> quant;
    if (t == TensorType::kQ8_0 || t == TensorType::kQ4_0) {
        quant = std::move(cpu::QuantMatmul::create(view).value());
    } else {
        dense = std::move(cpu::DenseMatmul::create(view).value());
    }
    for (auto _ : state) {
        if (dense) {
            dense->run(x.data(), m, y.data());
        } else {
            quant->run(x.data(), m, y.data());
        }
        benchmark::DoNotOptimize(y.data());
    }
    state.SetItemsProcessed(int64_t(state.iterations()) * 2 * m * n * k);
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(w.size()));
    state.SetLabel(formats::tensor_type_name(t));
}

void MatmulArgs(benchmark::internal::Benchmark* b) {
    for (auto t : {TensorType::kF32, TensorType::kF16, TensorType::kBF16, TensorType::kQ8_0,
                   TensorType::kQ4_0}) {
        for (int m : {1, 16, 128}) {
            b->Args({int64_t(t), m, 5632, 2048});  // TinyLlama ffn_up/gate
        }
        b->Args({int64_t(t), 512, 5632, 2048});  // prefill peak
        b->Args({int64_t(t), 1, 65536, 2048});   // decode, out of cache (TinyLlama-sized stream)
        b->Args({int64_t(t), 16, 65536, 2048});  // batched decode, out of cache
    }
}
BENCHMARK(BM_Matmul)->Apply(MatmulArgs)->Unit(benchmark::kMillisecond)->UseRealTime();

// Reference matmul, to show what the optimised kernels buy (small shape: it is slow).
void BM_MatmulReference(benchmark::State& state) {
    const auto t = TensorType(state.range(0));
    const auto w = weights(t, 256, 2048);
    const WeightView view{t, 256, 2048, w.data()};
    const auto x = randn(2048, 2);
    std::vector<float> y(256);
    for (auto _ : state) {
        ref::matmul(view, x.data(), 1, y.data());
        benchmark::DoNotOptimize(y.data());
    }
    state.SetItemsProcessed(int64_t(state.iterations()) * 2 * 256 * 2048);
}
BENCHMARK(BM_MatmulReference)->Arg(int64_t(TensorType::kQ8_0))->Arg(int64_t(TensorType::kF32));

void BM_RmsNorm(benchmark::State& state) {
    const int n = int(state.range(0));
    const auto x = randn(size_t(n), 1), w = randn(size_t(n), 2);
    std::vector<float> out(static_cast<size_t>(n));
    for (auto _ : state) {
        cpu::rmsnorm(x.data(), w.data(), n, 1e-5f, out.data());
        benchmark::DoNotOptimize(out.data());
    }
    state.SetItemsProcessed(int64_t(state.iterations()) * n);
}
BENCHMARK(BM_RmsNorm)->Arg(2048)->Arg(4096);

void BM_SwiGlu(benchmark::State& state) {
    const int n = int(state.range(0));
    const auto g = randn(size_t(n), 1), u = randn(size_t(n), 2);
    std::vector<float> out(static_cast<size_t>(n));
    for (auto _ : state) {
        cpu::swiglu(g.data(), u.data(), n, out.data());
        benchmark::DoNotOptimize(out.data());
    }
    state.SetItemsProcessed(int64_t(state.iterations()) * n);
}
BENCHMARK(BM_SwiGlu)->Arg(5632);

void BM_Softmax(benchmark::State& state) {
    const int n = int(state.range(0));
    auto x = randn(size_t(n), 1);
    for (auto _ : state) {
        cpu::softmax(x.data(), n);
        benchmark::DoNotOptimize(x.data());
    }
    state.SetItemsProcessed(int64_t(state.iterations()) * n);
}
BENCHMARK(BM_Softmax)->Arg(2048)->Arg(32000);

void BM_Rope(benchmark::State& state) {
    auto x = randn(32 * 64, 1);
    RopeParams p{.style = RopeStyle::kNormal, .rot_dim = 64, .freq_base = 10000.0f};
    int pos = 0;
    for (auto _ : state) {
        cpu::rope(x.data(), 32, 64, pos++ % 2048, p);
        benchmark::DoNotOptimize(x.data());
    }
    state.SetItemsProcessed(int64_t(state.iterations()) * 32 * 64);
}
BENCHMARK(BM_Rope);

void BM_QuantizeQ8(benchmark::State& state) {
    const auto x = randn(2048, 1);
    std::vector<int8_t> q(2048);
    std::vector<float> d(64);
    for (auto _ : state) {
        cpu::quantize_q8(x.data(), 2048, q.data(), d.data());
        benchmark::DoNotOptimize(q.data());
    }
    state.SetItemsProcessed(int64_t(state.iterations()) * 2048);
}
BENCHMARK(BM_QuantizeQ8);

// Decode attention for one token over `ctx` cached positions (TinyLlama heads), f32, f16
// and bf16 KV, block size 16. bytes = K and V read.
void BM_DecodeAttention(benchmark::State& state) {
    const int ctx = int(state.range(0));
    const auto dtype = KvDtype(state.range(1));
    const int bs = 16, kvh = 4, heads = 32, hd = 64;
    const int nblocks = (ctx + bs - 1) / bs;
    std::vector<uint8_t> kp(size_t(nblocks * bs * kvh * hd) * kv_dtype_bytes(dtype)), vp(kp.size());
    PagedKv kv{kp.data(), vp.data(), dtype, bs, kvh, hd};
    std::vector<int32_t> table(static_cast<size_t>(nblocks));
    for (int i = 0; i < nblocks; ++i) table[size_t(i)] = i;
    const auto row = randn(size_t(kvh * hd), 3);
    for (int p = 0; p < ctx; ++p) cpu::kv_write(kv, table.data(), p, row.data(), row.data());
    const auto q = randn(size_t(heads * hd), 4);
    std::vector<float> out(q.size());
    const AttentionShape shape{heads, 0.125f, heads * hd, heads * hd};
    for (auto _ : state) {
        cpu::paged_attention(kv, shape, {table.data(), 1, ctx - 1}, q.data(), out.data());
        benchmark::DoNotOptimize(out.data());
    }
    state.SetBytesProcessed(int64_t(state.iterations()) *
                            int64_t(2 * size_t(ctx) * kvh * hd * kv_dtype_bytes(dtype)));
}
BENCHMARK(BM_DecodeAttention)
    ->Args({512, int64_t(KvDtype::kF32)})
    ->Args({2048, int64_t(KvDtype::kF32)})
    ->Args({2048, int64_t(KvDtype::kF16)})
    ->Args({2048, int64_t(KvDtype::kBF16)})
    ->Unit(benchmark::kMicrosecond);

// Causal prefill attention of a whole prompt of `ctx` tokens (TinyLlama heads: 32 query
// heads over 4 KV heads, head dim 64), f32 or bf16 KV (vdpbf16ps where the CPU has it),
// block size 16, the threads OpenMP gives. items = multiply-adds of Q.K and P.V (2 * hd
// per query-key pair, causal half).
void BM_PrefillAttention(benchmark::State& state) {
    const int ctx = int(state.range(0));
    const auto dtype = KvDtype(state.range(1));
    const int bs = 16, kvh = 4, heads = 32, hd = 64;
    const int nblocks = (ctx + bs - 1) / bs;
    std::vector<uint8_t> kp(size_t(nblocks * bs * kvh * hd) * kv_dtype_bytes(dtype)), vp(kp.size());
    PagedKv kv{kp.data(), vp.data(), dtype, bs, kvh, hd};
    std::vector<int32_t> table(static_cast<size_t>(nblocks));
    for (int i = 0; i < nblocks; ++i) table[size_t(i)] = i;
    const auto rows = randn(size_t(ctx) * size_t(kvh * hd), 3);
    for (int p = 0; p < ctx; ++p) {
        const float* r = rows.data() + size_t(p) * size_t(kvh * hd);
        cpu::kv_write(kv, table.data(), p, r, r);
    }
    const auto q = randn(size_t(ctx) * size_t(heads * hd), 4);
    std::vector<float> out(q.size());
    const AttentionShape shape{heads, 0.125f, heads * hd, heads * hd};
    for (auto _ : state) {
        cpu::paged_attention(kv, shape, {table.data(), ctx, 0}, q.data(), out.data());
        benchmark::DoNotOptimize(out.data());
    }
    const double pairs = double(ctx) * double(ctx + 1) / 2.0;
    state.SetItemsProcessed(int64_t(double(state.iterations()) * pairs * 2.0 * hd * heads));
}
BENCHMARK(BM_PrefillAttention)
    ->ArgsProduct({{512, 2048, 8192}, {int64_t(KvDtype::kF32), int64_t(KvDtype::kBF16)}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagoda::kernels

BENCHMARK_MAIN();
