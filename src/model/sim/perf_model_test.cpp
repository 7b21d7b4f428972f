// The simulated GPU's performance model against hand-computed values: step times of a
// decode-only batch, a prefill chunk and a mixed batch on a toy card and a real one, the
// tensor-parallel all-reduce growing with TP, vLLM's memory sizing on a worked example, and
// the GPU table itself.
#include "model/sim/perf_model.h"

#include <gtest/gtest.h>

namespace pagoda::model::sim {
namespace {

// 100 TFLOPS, 1 TB/s, 100 GB/s links with 1 us hops; no derating, no overhead.
GpuSpec toy_gpu() {
    GpuSpec g;
    g.name = "toy";
    g.bf16_tflops = 100;
    g.memory_mib = 16384;
    g.memory_tbps = 1;
    g.link_gbps = 100;
    g.link_latency_us = 1;
    return g;
}

// 2 layers, dim 1024, 8 heads of 128 (MHA), FFN 4096, vocab 32000: 33,554,432 layer
// parameters (2 x (1024*1024 q + 2*1024*1024 kv + 1024*1024 o + 3*1024*4096 mlp)) and a
// 32,768,000-parameter LM head.
SimShape toy_shape() {
    SimShape s;
    s.layers = 2;
    s.dim = 1024;
    s.heads = 8;
    s.kv_heads = 8;
    s.head_dim = 128;
    s.ffn = 4096;
    s.vocab = 32000;
    return s;
}

constexpr Efficiency kIdeal{1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0};

PerfModel toy(int tp) {
    auto m = PerfModel::create(toy_gpu(), toy_shape(), tp, WeightType::kBf16,
                               kernels::KvDtype::kBF16, kIdeal);
    EXPECT_TRUE(m.ok()) << m.error().message;
    return *m;
}

TEST(SimPerfModel, ToyShapeParameters) {
    EXPECT_EQ(toy_shape().layer_params(), 33'554'432);
    EXPECT_EQ(toy_shape().lm_head_params(), 32'768'000);
}

// Qwen3-30B-A3B (config.json): 30.5 B parameters, 3.3 B of them active per token.
// Attention 48 x 18,874,368; experts 48 x 128 x (3 x 2048 x 768 + 2048 router);
// embeddings and lm head 151,936 x 2048 each.
TEST(SimPerfModel, MixtureOfExpertsActiveAndTotalParameters) {
    auto shape = find_shape("qwen3-30b-a3b");
    ASSERT_TRUE(shape.ok());
    const SimShape s = SimShape::of(*shape);
    EXPECT_EQ(s.head_dim, 128);
    EXPECT_EQ(s.layer_params(), 48LL * (18'874'368 + 128LL * (4'718'592 + 2048)));
    EXPECT_EQ(s.active_layer_params(), 48LL * (18'874'368 + 128 * 2048 + 8LL * 4'718'592));
    EXPECT_NEAR(double(s.total_params()) / 1e9, 30.53, 0.01);
    EXPECT_NEAR(double(s.active_layer_params() + 2 * s.lm_head_params()) / 1e9, 3.35, 0.01);
    // One token reads its experts only; 512 tokens touch all of them (1 - (120/128)^512).
    EXPECT_DOUBLE_EQ(s.read_layer_params(1), double(s.active_layer_params()));
    EXPECT_NEAR(s.read_layer_params(512) / double(s.layer_params()), 1.0, 1e-9);
    auto gpu = find_gpu("a100-80g");
    ASSERT_TRUE(gpu.ok());
    auto m = PerfModel::create(*gpu, s, 1, WeightType::kBf16, kernels::KvDtype::kBF16, {});
    ASSERT_TRUE(m.ok()) << m.error().message;
    // Decode of one sequence costs the bytes of its active parameters, not of all 30 B:
    // 2 x (active layers + lm head) plus its KV.
    const StepCost one = m->step({{1, 0}});
    EXPECT_NEAR(one.bytes_per_gpu,
                2.0 * double(s.active_layer_params() + s.lm_head_params()) + 2.0 * 48 * 4 * 128 * 2,
                1.0);
    EXPECT_NEAR(one.flops,
                2.0 * double(s.active_layer_params() + s.lm_head_params()) + 4.0 * 48 * 32 * 128,
                1.0);
    // Memory holds every expert.
    auto plan = m->memory(0.9, 2048);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    EXPECT_EQ(plan->weights, 2 * s.total_params());
}

TEST(SimPerfModel, DecodeBatchIsMemoryBound) {
    // 4 sequences, one new token each after 1000 cached.
    // FLOPs: 2*33,554,432*4 + 2*32,768,000*4 + 4*2 layers*8 heads*128*(4*1001 pairs)
    //      = 268,435,456 + 262,144,000 + 32,800,768 = 563,380,224.
    // Bytes: weights (33,554,432 + 32,768,000) * 2 = 132,644,864, plus KV 2*2*8*128*2 =
    //        8,192 bytes per token for 4*1001 tokens = 32,800,768: 165,445,632.
    const StepCost c = toy(1).step({{1, 1000}, {1, 1000}, {1, 1000}, {1, 1000}});
    EXPECT_DOUBLE_EQ(c.flops, 563'380'224.0);
    EXPECT_DOUBLE_EQ(c.bytes_per_gpu, 165'445'632.0);
    EXPECT_NEAR(c.compute_s, 5.63380224e-6, 1e-15);
    EXPECT_NEAR(c.memory_s, 1.65445632e-4, 1e-15);
    EXPECT_NEAR(c.total_s, 1.65445632e-4, 1e-15);
    EXPECT_EQ(c.comm_s, 0.0);
}

TEST(SimPerfModel, PrefillChunkIsComputeBound) {
    // One 512-token chunk from position 0, sampling its last row: 512*513/2 causal pairs.
    // FLOPs: 2*33,554,432*512 + 2*32,768,000 + 4*2*8*128*131,328 = 35,501,113,344.
    // Bytes: 132,644,864 + 8,192*512 = 136,839,168.
    const StepCost c = toy(1).step({{512, 0}});
    EXPECT_DOUBLE_EQ(c.flops, 35'501'113'344.0);
    EXPECT_DOUBLE_EQ(c.bytes_per_gpu, 136'839'168.0);
    EXPECT_NEAR(c.total_s, 3.5501113344e-4, 1e-15);
}

TEST(SimPerfModel, MixedBatch) {
    // Three decodes after 200 tokens and a 256-token chunk after 256 cached that does not
    // sample yet. Pairs: 3*201 + 256*256 + 256*257/2 = 98,967.
    // FLOPs: 2*33,554,432*259 + 2*32,768,000*3 + 4*2*8*128*98,967 = 18,389,098,496.
    // Bytes: 132,644,864 + 8,192*(3*201 + 512) = 141,778,944.
    const StepCost c = toy(1).step({{1, 200}, {1, 200}, {1, 200}, {256, 256, false}});
    EXPECT_DOUBLE_EQ(c.flops, 18'389'098'496.0);
    EXPECT_DOUBLE_EQ(c.bytes_per_gpu, 141'778'944.0);
    EXPECT_NEAR(c.compute_s, 1.8389098496e-4, 1e-15);
    EXPECT_NEAR(c.total_s, 1.8389098496e-4, 1e-15);
}

TEST(SimPerfModel, TensorParallelSplitsWorkAndPaysAllReduce) {
    // TP 2, the same decode batch: weights 132,644,864 / 2 and 4 KV heads per GPU (4,096
    // bytes per token): 66,322,432 + 4,096*4004 = 82,722,816 bytes. All-reduce: 2 per layer
    // of 4 tokens * 1024 * 2 bytes = 8,192: (2*1/2 * 8,192 / 100e9 + 2*1 * 1e-6) each.
    const std::vector<SeqWork> b = {{1, 1000}, {1, 1000}, {1, 1000}, {1, 1000}};
    const StepCost c = toy(2).step(b);
    EXPECT_DOUBLE_EQ(c.bytes_per_gpu, 82'722'816.0);
    const double per = 8192.0 / 100e9 + 2e-6;
    EXPECT_NEAR(c.comm_s, 4 * per, 1e-15);
    EXPECT_NEAR(c.total_s, 82'722'816.0 / 1e12 + 4 * per, 1e-15);
    // More GPUs: less per-GPU memory time, more all-reduce time.
    double last_comm = c.comm_s;
    for (int tp : {4, 8}) {
        const StepCost t = toy(tp).step(b);
        EXPECT_GT(t.comm_s, last_comm) << tp;
        EXPECT_LT(t.memory_s, c.memory_s) << tp;
        last_comm = t.comm_s;
    }
    // Efficiency factors derate: half the bandwidth doubles the memory time.
    auto half = PerfModel::create(toy_gpu(), toy_shape(), 1, WeightType::kBf16,
                                  kernels::KvDtype::kBF16, {1.0, 0.5, 1.0, 0.25, 1.0, 1.0, 0.0});
    ASSERT_TRUE(half.ok());
    const StepCost h = half->step(b);
    EXPECT_NEAR(h.memory_s, 2 * 1.65445632e-4, 1e-15);
    EXPECT_NEAR(h.total_s, 2 * 1.65445632e-4 + 0.25e-3, 1e-15);
}

TEST(SimPerfModel, MemorySizingAsVllm) {
    // Llama-3-8B, bf16, TP 1 on an A100-80G (81,920 MiB), --gpu-memory-utilization 0.9,
    // max_num_batched_tokens 2048:
    //   budget      0.9 * 85,899,345,920                  = 77,309,411,328
    //   weights     8,030,261,248 params * 2              = 16,060,522,496
    //               (Meta's published count: 32 * 218,103,808 matmul + 2 * 525,336,576
    //               embedding and head + 65 * 4096 norm weights)
    //   activation  2048 * (4*4096 + 2*14336 + 4096 + 2*1024) * 2 + 256 * 128256 * 4
    //                                                      =    341,049,344
    //   non-torch   512 MiB                               =    536,870,912
    //   KV          the rest                              = 60,370,968,576
    // at 2*32*8*128*2 = 131,072 bytes per token: 28,787 blocks of 16.
    auto gpu = find_gpu("a100-80g");
    ASSERT_TRUE(gpu.ok());
    auto shape = find_shape("llama-3-8b");
    ASSERT_TRUE(shape.ok());
    const SimShape s = SimShape::of(*shape);
    EXPECT_EQ(s.total_params(), 8'030'261'248);
    auto m = PerfModel::create(*gpu, s, 1, WeightType::kBf16, kernels::KvDtype::kBF16, {});
    ASSERT_TRUE(m.ok());
    auto p = m->memory(0.9, 2048);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p->budget, 77'309'411'328);
    EXPECT_EQ(p->weights, 16'060'522'496);
    EXPECT_EQ(p->activation, 341'049'344);
    EXPECT_EQ(p->kv, 60'370'968'576);
    EXPECT_EQ(p->kv_bytes_per_token, 131'072);
    EXPECT_EQ(p->num_blocks(16), 28'787);
}

TEST(SimPerfModel, ClearErrors) {
    const auto err = [](auto r) { return r.ok() ? std::string() : r.error().message; };
    EXPECT_NE(err(PerfModel::create(toy_gpu(), toy_shape(), 3, WeightType::kBf16,
                                    kernels::KvDtype::kBF16, {}))
                  .find("must divide the 8 attention heads"),
              std::string::npos);
    EXPECT_NE(err(PerfModel::create(toy_gpu(), toy_shape(), 1, WeightType::kBf16,
                                    kernels::KvDtype::kBF16, {1.5, 1, 1, 0}))
                  .find("efficiency factor compute = 1.5"),
              std::string::npos);
    // Llama-3-8B does not fit a 16 GiB card at TP 1; it does at TP 2.
    const SimShape s = SimShape::of(*find_shape("llama-3-8b"));
    auto m1 = PerfModel::create(toy_gpu(), s, 1, WeightType::kBf16, kernels::KvDtype::kBF16, {});
    ASSERT_TRUE(m1.ok());
    const std::string msg = err(m1->memory(0.9, 2048));
    EXPECT_NE(msg.find("needs 15.0 GiB per GPU for weights"), std::string::npos) << msg;
    EXPECT_NE(msg.find("leaves 14.4 GiB of 16.0"), std::string::npos) << msg;
    auto m2 = PerfModel::create(toy_gpu(), s, 2, WeightType::kBf16, kernels::KvDtype::kBF16, {});
    EXPECT_TRUE(m2->memory(0.9, 2048).ok());
    const std::string unknown = err(find_gpu("a100"));
    EXPECT_NE(unknown.find("unknown GPU 'a100' (known: "), std::string::npos) << unknown;
    EXPECT_NE(unknown.find("a100-80g"), std::string::npos) << unknown;
}

TEST(SimGpuTable, EveryCardHasNumbersAndASource) {
    ASSERT_EQ(builtin_gpus().size(), 6u);
    for (const GpuSpec& g : builtin_gpus()) {
        EXPECT_FALSE(g.source.empty()) << g.name;
        EXPECT_GT(g.bf16_tflops, 0) << g.name;
        EXPECT_GT(g.memory_mib, 0) << g.name;
    }
    EXPECT_DOUBLE_EQ(find_gpu("h100-sxm")->fp8_tflops, 1979.0);
    EXPECT_FALSE(parse_gpu_table("[x]\nbf16_tflops = 1\n", "t.toml").ok()) << "no source";
    auto bad = parse_gpu_table("[x]\nbf16_tflops = -1\nsource = \"s\"\n", "t.toml");
    EXPECT_NE(bad.error().message.find("t.toml: [x] bf16_tflops = -1 must be >= 0"),
              std::string::npos)
        << bad.error().message;
}

}  // namespace
}  // namespace pagoda::model::sim
