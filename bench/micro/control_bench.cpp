// Benchmarks of the live-configuration machinery for docs/performance.md (plain program,
// not timed tests). Two parts:
//
//   control_bench relayout MODEL [PROMPT GEN AT]
//     KV re-layout under load at 1, 16 and 64 live sequences: N greedy requests (PROMPT
//     random tokens, GEN new tokens each); once every sequence has generated AT tokens the
//     block size changes 16 -> 32 (same memory). Reports the engine pause, the tokens sent
//     back for recompute, and the wall time against the same run without the change.
//
//   control_bench block-size SHAPE WEIGHT_BYTES_PER_TOKEN
//     Decode attention per sequence-step on the real kernel for each block size at 1k, 2k,
//     4k and 8k contexts (SHAPE: a model::known_shapes() name, f32 KV), the block size each
//     policy picks for traffic at that length, and the predicted step latency of each
//     choice: attention + the weight-streaming time measured in the same run (memory read
//     bandwidth over WEIGHT_BYTES_PER_TOKEN).
#include <fmt/core.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "base/huge_buffer.h"
#include "base/log.h"
#include "control/policy/block_size_policy.h"
#include "engine/engine.h"
#include "kernels/cpu/ops.h"
#include "model/test_model.h"

using namespace pagoda;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct RunResult {
    double wall = 0;
    engine::RelayoutReport rep;
    bool changed = false;
};

RunResult run(model::Model& m, int n, int prompt, int gen, int at, bool change) {
    engine::EngineConfig cfg;
    cfg.kv.block_size = 16;
    cfg.kv.memory_bytes = int64_t(2) << 30;
    cfg.sched.knobs.max_num_seqs = 256;
    cfg.sched.knobs.max_num_batched_tokens = 2048;
    auto e = engine::Engine::create(m, cfg);
    if (!e.ok()) throw std::runtime_error(e.error().message);
    std::mt19937 rng(7);
    const int vocab = m.tokenizer().vocab().size();
    std::vector<std::shared_ptr<engine::RequestStream>> ss;
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
        engine::Request r;
        for (int k = 0; k < prompt; ++k) r.prompt_ids.push_back(int32_t(1 + rng() % (vocab - 1)));
        r.sampling.temperature = 0;
        r.sampling.max_tokens = gen;
        r.sampling.ignore_eos = true;
        ss.push_back(*(*e)->submit(std::move(r)));
    }
    RunResult out;
    while (change && (*e)->stats()->generation_tokens < int64_t(n) * at) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (change) {
        kvcache::KvCacheConfig kv = (*e)->kv_config();
        kv.block_size = 32;
        kv.num_blocks = 0;
        auto rep = (*e)->relayout(kv);
        if (!rep.ok()) throw std::runtime_error(rep.error().message);
        out.rep = *rep;
    }
    engine::Event ev;
    for (auto& s : ss) {
        while (s->next(ev)) {
        }
    }
    out.wall = seconds_since(t0);
    return out;
}

int relayout_bench(int argc, char** argv) {
    auto m = model::Model::load(argv[2]);
    if (!m.ok()) return fmt::print(stderr, "{}\n", m.error().message), 1;
    const int prompt = argc > 3 ? std::atoi(argv[3]) : 32;
    const int gen = argc > 4 ? std::atoi(argv[4]) : 96;
    const int at = argc > 5 ? std::atoi(argv[5]) : 32;
    fmt::print(
        "| live sequences | pause ms | recompute tokens | wall without | wall with | "
        "extra wall | extra per recompute token |\n|---|---|---|---|---|---|---|\n");
    for (int n : {1, 16, 64}) {
        const RunResult base = run(**m, n, prompt, gen, at, false);
        const RunResult with = run(**m, n, prompt, gen, at, true);
        const double extra = with.wall - base.wall;
        fmt::print("| {} | {:.2f} | {} | {:.2f} s | {:.2f} s | {:+.2f} s | {:.2f} ms |\n", n,
                   with.rep.pause_seconds * 1e3, with.rep.recompute_tokens, base.wall, with.wall,
                   extra,
                   with.rep.recompute_tokens > 0 ? extra / with.rep.recompute_tokens * 1e3 : 0.0);
    }
    return 0;
}

double read_bandwidth() {
    const size_t bytes = size_t(1) << 30;
    auto buf = HugeBuffer::allocate(bytes);
    if (!buf.ok()) return 0;
    std::memset(buf->data(), 1, bytes);
    double best = 0;
    for (int i = 0; i < 3; ++i) {
        const auto t0 = Clock::now();
        volatile float s =
            kernels::cpu::sum_f32(reinterpret_cast<const float*>(buf->data()), int64_t(bytes / 4));
        (void)s;
        best = std::max(best, double(bytes) / seconds_since(t0));
    }
    return best;
}

int block_size_bench(int argc, char** argv) {
    auto shape = model::find_shape(argv[2]);
    if (!shape.ok()) return fmt::print(stderr, "{}\n", shape.error().message), 1;
    const double weight_bytes = argc > 3 ? std::atof(argv[3]) : 1.10e9;
    control::CalibrationShape cs{shape->num_layers, shape->num_heads, shape->num_kv_heads,
                                 shape->dim / shape->num_heads, kernels::KvDtype::kF32};
    const std::vector<int64_t> lengths = {1024, 2048, 4096, 8192};
    auto cal = control::calibrate(cs, lengths);
    if (!cal.ok()) return fmt::print(stderr, "{}\n", cal.error().message), 1;
    const double bw = read_bandwidth();
    const double weights_ms = weight_bytes / bw * 1e3;
    fmt::print("memory read bandwidth {:.1f} GB/s: weights {:.2f} ms per decode step\n\n", bw / 1e9,
               weights_ms);
    fmt::print(
        "| context | attention ms per sequence-step, by block size 8 / 16 / 32 / 48 / 64 / 128 |"
        " static 16 | seed | measured | step ms: static 16 / seed / measured |\n"
        "|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < lengths.size(); ++i) {
        std::string row;
        for (const auto& [b, t] : cal->seconds)
            row += fmt::format("{}{:.3f}", row.empty() ? "" : " / ", t[i] * 1e3);
        control::LengthHistogram h;
        for (int k = 0; k < 100; ++k) h.add(lengths[i]);
        control::MeasuredInputs in;
        in.kv_memory_bytes = int64_t(8) << 30;
        in.kv_bytes_per_token = int64_t(2) * cs.num_layers * cs.num_kv_heads * cs.head_dim * 4;
        in.current_block = 16;
        const int measured = control::measured_decide(h, *cal, in).block;
        const int seed = control::seed_decide(h, double(lengths[i]), double(lengths[i]), {}).block;
        auto step = [&](int b) { return weights_ms + cal->attention_seconds(b, lengths[i]) * 1e3; };
        fmt::print("| {} | {} | 16 | {} | {} | {:.2f} / {:.2f} / {:.2f} |\n", lengths[i], row, seed,
                   measured, step(16), step(seed), step(measured));
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    set_log_level(LogLevel::kWarn);
    if (argc >= 3 && std::strcmp(argv[1], "relayout") == 0) return relayout_bench(argc, argv);
    if (argc >= 3 && std::strcmp(argv[1], "block-size") == 0) return block_size_bench(argc, argv);
    fmt::print(stderr,
               "usage: control_bench relayout MODEL [PROMPT GEN AT]\n"
               "       control_bench block-size SHAPE [WEIGHT_BYTES_PER_TOKEN]\n");
    return 2;
}
