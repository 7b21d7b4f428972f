// The cost of verifying speculative drafts: one sequence's forward pass over M rows at a
// context depth (M = 1 is a plain decode step; M = 1 + K verifies K drafts), on a model
// file given by PAGODA_BENCH_MODEL (scripts/perf-spec.sh writes the TinyLlama-1.1B shape).
//   PAGODA_BENCH_MODEL=/tmp/pagoda-perf/tinyllama-q8_0.gguf verify_bench
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <numeric>

#include "base/check.h"
#include "kvcache/kv_pool.h"
#include "model/model.h"

namespace {

using namespace pagoda;

struct Fixture {
    std::unique_ptr<model::Model> model;
    std::unique_ptr<kvcache::KvPool> pool;
    std::vector<int32_t> table;
    std::vector<float> logits;
};

Fixture& fixture() {
    static Fixture f = [] {
        Fixture x;
        const char* path = std::getenv("PAGODA_BENCH_MODEL");
        PAGODA_CHECK(path != nullptr) << "set PAGODA_BENCH_MODEL to a GGUF file";
        auto m = model::Model::load(path);
        PAGODA_CHECK(m.ok()) << m.error().message;
        x.model = std::move(m).value();
        const auto& c = x.model->config();
        kvcache::KvCacheConfig kv{.block_size = 16, .num_blocks = 160};
        auto p = kvcache::KvPool::create(kv, c.num_layers, c.num_kv_heads, c.head_dim);
        PAGODA_CHECK(p.ok()) << p.error().message;
        x.pool = std::make_unique<kvcache::KvPool>(std::move(p).value());
        x.table.resize(160);
        std::iota(x.table.begin(), x.table.end(), 0);
        return x;
    }();
    return f;
}

// One forward of `rows` tokens at positions [depth, depth + rows), logits for every row.
void run(Fixture& f, int depth, int rows) {
    model::ForwardBatch b;
    for (int i = 0; i < rows; ++i) b.token_ids.push_back(100 + i);
    b.seqs.push_back({.token_start = 0,
                      .num_tokens = rows,
                      .pos_start = depth,
                      .block_table = std::span<const int32_t>(f.table)});
    for (int i = 0; i < rows; ++i) b.logits_rows.push_back(i);
    const Status st = f.model->forward(b, kvcache::KvView(*f.pool), f.logits);
    PAGODA_CHECK(st.ok()) << st.error().message;
}

void BM_VerifyRows(benchmark::State& state) {
    Fixture& f = fixture();
    const int depth = int(state.range(0)), rows = int(state.range(1));
    for (int d = 0; d < depth; d += 512) run(f, d, std::min(512, depth - d));  // the context
    for (auto _ : state) run(f, depth, rows);
    state.SetLabel("depth " + std::to_string(depth) + ", " + std::to_string(rows) + " rows");
}
BENCHMARK(BM_VerifyRows)
    ->ArgsProduct({{512}, {1, 2, 3, 5, 9}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
