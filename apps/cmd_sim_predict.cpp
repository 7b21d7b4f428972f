// pagoda sim predict: what the performance model says about a deployment without running
// it: for each batch size and tensor-parallel degree, the decode step time, throughput in
// all and per GPU, the prefill time of a prompt, where the time goes, and how many
// sequences of a context the KV pool holds.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "apps/cli_common.h"
#include "apps/commands.h"
#include "model/sim/perf_model.h"
#include "model/test_model.h"

namespace pagoda::app {

namespace {

namespace sim = model::sim;

struct PredictFlags {
    std::string gpu = "a100-80g", model = "llama-3-8b", weights = "bf16", gpu_table;
    std::vector<std::string> points = {"16:8", "12:6"};
    int64_t context = 1024, prompt = 1024;
    int max_num_batched_tokens = 2048;
    double gpu_memory_utilization = 0.9;
};

struct Point {
    int batch = 0, tp = 0;
};

Result<Point> parse_point(const std::string& s) {
    Point p;
    char tail = 0;
    if (std::sscanf(s.c_str(), "%d:%d%c", &p.batch, &p.tp, &tail) != 2 || p.batch < 1 || p.tp < 1) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--point '{}': write BATCH:TP with positive integers, e.g. 16:8", s);
    }
    return p;
}

// One row of the table, or the reason this point cannot run.
Status predict_row(const PredictFlags& f, const sim::GpuSpec& gpu, const sim::SimShape& shape,
                   sim::WeightType w, Point p) {
    PAGODA_ASSIGN_OR_RETURN(
        sim::PerfModel pm,
        sim::PerfModel::create(gpu, shape, p.tp, w, kernels::KvDtype::kBF16, gpu.efficiency));
    PAGODA_ASSIGN_OR_RETURN(sim::MemoryPlan plan,
                            pm.memory(f.gpu_memory_utilization, f.max_num_batched_tokens));
    const sim::StepCost d =
        pm.step(std::vector<sim::SeqWork>(size_t(p.batch), sim::SeqWork{1, f.context, true}));
    // Prefill of one prompt in max_num_batched_tokens chunks, nothing else in the batch.
    double prefill_s = 0;
    for (int64_t done = 0; done < f.prompt; done += f.max_num_batched_tokens) {
        const int n = int(std::min<int64_t>(f.max_num_batched_tokens, f.prompt - done));
        prefill_s += pm.step({sim::SeqWork{n, done, done + n >= f.prompt}}).total_s;
    }
    const double tok_s = p.batch / d.total_s;
    const int64_t kv_tokens = plan.kv / plan.kv_bytes_per_token;
    const char* bound = d.compute_s > d.memory_s ? "compute" : "memory";
    std::printf("%6d %4d %6.2f %9.2f %10.0f %10.0f %7.1f%% %7s %10.1f %10lld %8lld\n", p.batch,
                p.tp, double(p.batch) / p.tp, d.total_s * 1e3, tok_s, tok_s / p.tp,
                100 * d.comm_s / d.total_s, bound, prefill_s * 1e3, (long long)kv_tokens,
                (long long)(kv_tokens / (f.context + 1)));
    return ok_status();
}

int run_predict(const PredictFlags& f) {
    auto fail2 = [](const Error& e) {
        std::fprintf(stderr, "error: %s\n", e.message.c_str());
        return 2;
    };
    auto gpu = sim::find_gpu(f.gpu, f.gpu_table);
    if (!gpu.ok()) return fail2(gpu.error());
    auto shape = model::find_shape(f.model);
    if (!shape.ok()) return fail2(shape.error());
    auto w = sim::parse_weight_type(f.weights);
    if (!w.ok()) return fail2(w.error());
    std::vector<Point> points;
    for (const auto& s : f.points) {
        auto p = parse_point(s);
        if (!p.ok()) return fail2(p.error());
        points.push_back(*p);
    }
    const sim::SimShape ss = sim::SimShape::of(*shape);
    std::printf(
        "%s on %s (%s weights, bf16 KV), decode at context %lld, prefill of a %lld-token "
        "prompt in %d-token chunks, --gpu-memory-utilization %.2f\n",
        f.model.c_str(), gpu->name.c_str(), f.weights.c_str(), (long long)f.context,
        (long long)f.prompt, f.max_num_batched_tokens, f.gpu_memory_utilization);
    std::printf("%6s %4s %6s %9s %10s %10s %8s %7s %10s %10s %8s\n", "batch", "TP", "b/TP",
                "step ms", "tok/s", "tok/s/GPU", "comm", "bound", "prefill ms", "KV tokens",
                "max seqs");
    int failed = 0;
    for (const Point& p : points) {
        if (Status st = predict_row(f, *gpu, ss, *w, p); !st.ok()) {
            std::printf("%6d %4d  cannot run: %s\n", p.batch, p.tp, st.error().message.c_str());
            ++failed;
        }
    }
    std::printf(
        "(step ms: one decode step of the whole batch = the TPOT; tok/s: batch / step; "
        "comm: share of the step in all-reduce; KV tokens: the pool of one replica; max "
        "seqs: sequences of that context it holds)\n");
    return failed == int(points.size()) ? 2 : 0;
}

}  // namespace

void add_sim_predict(CLI::App* sim_cmd, std::function<int()>& action) {
    auto f = std::make_shared<PredictFlags>();
    CLI::App* c = sim_cmd->add_subcommand(
        "predict",
        "What the performance model predicts for batch sizes and tensor-parallel degrees of a "
        "model on a card: decode step time (TPOT), throughput in all and per GPU, prefill time, "
        "all-reduce share, KV capacity");
    c->add_option("--sim-gpu", f->gpu, "The card")->capture_default_str();
    c->add_option("--sim-model", f->model, "A known shape")->capture_default_str();
    c->add_option("--sim-weight-dtype", f->weights, "bf16, fp8, q8_0, q4_0")->capture_default_str();
    c->add_option("--sim-gpu-table", f->gpu_table, "Extra GPU table")->check(CLI::ExistingFile);
    c->add_option("--point", f->points, "BATCH:TP, repeatable")->capture_default_str();
    c->add_option("--context", f->context, "Context of every decoding sequence")
        ->capture_default_str()
        ->check(CLI::Range(int64_t(0), int64_t(1) << 24));
    c->add_option("--prompt", f->prompt, "Prompt length for the prefill time")
        ->capture_default_str()
        ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
    c->add_option("--max-num-batched-tokens", f->max_num_batched_tokens, "Prefill chunk")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 20));
    c->add_option("--gpu-memory-utilization", f->gpu_memory_utilization, "As vLLM's")
        ->capture_default_str()
        ->check(CLI::Range(0.01, 1.0));
    c->callback([f, &action] { action = [f] { return run_predict(*f); }; });
}

}  // namespace pagoda::app
