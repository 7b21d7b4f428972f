// The sim against published loaded-serving figures (sim_check.h).
#include "rehearse/sim_check.h"

#include <fmt/core.h>

#include <cmath>
#include <random>

#include "model/test_model.h"

namespace pagoda::rehearse {

namespace {

// ShareGPT as sglang's bench_serving samples it (first turns; prompts 4-1024 tokens,
// prompt + output <= 2048): log-normal fits with the published means (~230 in, ~200 out).
std::vector<Arrival> sharegpt_like(double rps, int n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::lognormal_distribution<double> in(std::log(110.0), 1.2), out(std::log(130.0), 0.95);
    std::exponential_distribution<double> gap(rps > 0 ? rps : 1);
    std::vector<Arrival> v;
    double t = 0;
    for (int i = 0; i < n; ++i) {
        Arrival a;
        a.t_s = t;
        a.prompt = int32_t(std::clamp(in(rng), 4.0, 1024.0));
        a.output = int32_t(std::clamp(out(rng), 4.0, 2048.0 - a.prompt));
        v.push_back(a);
        if (rps > 0) t += gap(rng);
    }
    return v;
}

ReplicaConfig vllm_060() {
    ReplicaConfig c;
    c.max_num_seqs = 256;
    c.max_num_batched_tokens = 4096;  // max(max_model_len, 2048) without chunked prefill
    c.chunked_prefill = false;
    c.scheduler_steps = 10;
    c.gpu_memory_utilization = 0.9;
    return c;
}

}  // namespace

std::vector<LoadedPoint> published_loaded_points() {
    const std::string src =
        "sgl-project/sglang benchmark/benchmark_vllm_060/README.md (vLLM 0.6.0, "
        "--num-scheduler-steps 10, --max_model_len 4096, ShareGPT)";
    const ReplicaConfig e = vllm_060();
    return {
        {"a100-80g", "llama-3.1-8b", 1, 4, 1200, 100.48, 14.14, 0, true, e, 4096, src},
        {"a100-80g", "llama-3.1-8b", 1, 8, 2400, 120.39, 17.09, 0, true, e, 4096, src},
        {"a100-80g", "llama-3.1-8b", 1, 0, 5000, 0, 0, 21.27, false, e, 4096, src},
        {"h100-sxm", "llama-3-70b", 4, 4, 1200, 179.15, 23.58, 0, false, e, 4096, src},
        {"h100-sxm", "llama-3-70b", 4, 8, 2400, 207.12, 29.15, 0, false, e, 4096, src},
        {"h100-sxm", "llama-3-70b", 4, 0, 5000, 0, 0, 19.04, false, e, 4096, src},
    };
}

Result<std::vector<PointResult>> check_points(const std::vector<LoadedPoint>& points,
                                              double seq_overhead_ms) {
    std::vector<PointResult> out;
    for (const LoadedPoint& p : points) {
        PAGODA_ASSIGN_OR_RETURN(model::sim::GpuSpec gpu, model::sim::find_gpu(p.gpu));
        PAGODA_ASSIGN_OR_RETURN(model::ModelShape shape, model::find_shape(p.model));
        model::sim::Efficiency eff = gpu.efficiency;
        eff.seq_overhead_ms = seq_overhead_ms;
        PAGODA_ASSIGN_OR_RETURN(model::sim::PerfModel perf,
                                model::sim::PerfModel::create(gpu, model::sim::SimShape::of(shape),
                                                              p.tp, model::sim::WeightType::kBf16,
                                                              kernels::KvDtype::kBF16, eff));
        const std::vector<Arrival> load = sharegpt_like(p.rps, p.prompts, 11);
        const double span = p.rps > 0 ? load.back().t_s + 1 : 1;
        ArmPlan arm;
        arm.name = "published";
        arm.replica = p.engine;
        arm.replicas = 1;
        PAGODA_ASSIGN_OR_RETURN(ArmResult r,
                                simulate(perf, p.max_model_len, load, {span, 1}, arm, Slo{}, {}));
        PointResult pr{p, r.p50_ttft_s * 1000, r.p50_tpot_s * 1000, 0};
        if (p.rps == 0 && r.last_done_s > 0) pr.throughput_rps = double(r.requests) / r.last_done_s;
        out.push_back(pr);
    }
    return out;
}

Result<double> fit_seq_overhead(const std::vector<LoadedPoint>& points) {
    std::vector<LoadedPoint> fit;
    for (const auto& p : points) {
        if (p.fit) fit.push_back(p);
    }
    double best = 0, best_err = INFINITY;
    for (int k = 0; k <= 50; ++k) {
        const double o = 0.01 * k;
        PAGODA_ASSIGN_OR_RETURN(auto rows, check_points(fit, o));
        double err = 0;
        for (const auto& r : rows) {
            err += r.point.rps > 0 ? std::fabs(r.tpot_ms / r.point.tpot_ms - 1)
                                   : std::fabs(r.throughput_rps / r.point.throughput_rps - 1);
        }
        if (err < best_err) best_err = err, best = o;
    }
    return best;
}

std::string points_table(const std::vector<PointResult>& rows, double seq_overhead_ms) {
    std::string s = fmt::format(
        "{:<9} {:<14} {:>3} {:>5} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7}  {}\n", "card", "model", "tp",
        "rps", "TTFT pub", "TTFT sim", "error", "TPOT pub", "TPOT sim", "error", "role");
    for (const auto& r : rows) {
        const LoadedPoint& p = r.point;
        const char* role = p.fit ? "fit" : "held out";
        if (p.rps == 0) {
            s += fmt::format(
                "{:<9} {:<14} {:>3} {:>5} {:>30} {:>9.2f} req/s pub, {:.2f} sim "
                "({:+.1f}%)  {}\n",
                p.gpu, p.model, p.tp, "inf", "throughput", p.throughput_rps, r.throughput_rps,
                100 * (r.throughput_rps / p.throughput_rps - 1), role);
            continue;
        }
        s += fmt::format(
            "{:<9} {:<14} {:>3} {:>5g} {:>9.1f} {:>9.1f} {:>+6.1f}% {:>9.2f} {:>9.2f} "
            "{:>+6.1f}%  {}\n",
            p.gpu, p.model, p.tp, p.rps, p.ttft_ms, r.ttft_ms, 100 * (r.ttft_ms / p.ttft_ms - 1),
            p.tpot_ms, r.tpot_ms, 100 * (r.tpot_ms / p.tpot_ms - 1), role);
    }
    s += fmt::format("(medians, ms; overhead per sequence per step {:.2f} ms; source: {})\n",
                     seq_overhead_ms, rows.empty() ? "" : rows[0].point.source);
    return s;
}

}  // namespace pagoda::rehearse
