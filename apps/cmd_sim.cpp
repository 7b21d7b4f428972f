// pagoda sim calibrate: fit the simulated GPU's efficiency factors to measured step times
// (published GPU measurements, a measurement file, or this machine's CPU engine measured
// now) and print the fit error; optionally write the cards with the fitted factors as a GPU
// table that `pagoda serve --backend sim --sim-gpu-table FILE` reads.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "apps/cli_common.h"
#include "apps/commands.h"
#include "apps/engine_flags.h"
#include "base/log.h"
#include "engine/engine.h"
#include "model/model.h"
#include "model/sim/calibrate.h"

namespace pagoda::app {

namespace {

namespace sim = model::sim;

struct CalibrateFlags {
    std::vector<std::string> measurements;
    bool published = false;
    std::string measure_cpu;  // a GGUF model to run on this machine's CPU engine
    std::string name = "host-cpu";
    std::string fit = "compute,memory,overhead";
    std::string gpu_table;
    std::string output, save_measurements;
    bool no_fit = false;
    std::string step_trace;  // served steps of the --measure-cpu model
    bool trace_only = false;
    int threads = 0;
};

Result<std::string> read_text(const std::string& path) {
    std::ifstream in(path);
    if (!in) return make_error(ErrorCode::kNotFound, "cannot read {}", path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

Result<sim::FitFactors> parse_factors(const std::string& list) {
    sim::FitFactors f{false, false, false, false, false, false};
    std::stringstream in(list);
    std::string item;
    while (std::getline(in, item, ',')) {
        if (item == "compute")
            f.compute = true;
        else if (item == "memory")
            f.memory = true;
        else if (item == "overhead")
            f.overhead = true;
        else if (item == "network")
            f.network = true;
        else if (item == "overlap")
            f.overlap = true;
        else if (item == "attention")
            f.attention = true;
        else
            return make_error(ErrorCode::kInvalidArgument,
                              "--fit: unknown factor '{}' (allowed: compute, memory, overhead, "
                              "network, overlap, attention)",
                              item);
    }
    return f;
}

// The shape of a set's model: a known shape, or a GGUF file's (read without its weights).
Result<sim::SimShape> shape_of(const std::string& model) {
    if (auto s = model::find_shape(model); s.ok()) return sim::SimShape::of(*s);
    model::SimOptions o;
    o.model = model;
    o.vocab_path = default_model_path();
    PAGODA_ASSIGN_OR_RETURN(o.gpu, sim::find_gpu("a100-80g"));
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<model::Model> m, model::Model::simulate(o));
    return m->perf_model()->shape();
}

Result<sim::WeightType> weight_type_of(const model::Model& m) {
    const formats::GgufTensorInfo* t = m.gguf().find_tensor("blk.0.ffn_down.weight");
    const formats::TensorType type = t ? t->type : formats::TensorType::kF32;
    if (type == formats::TensorType::kQ8_0) return sim::WeightType::kQ8_0;
    if (type == formats::TensorType::kQ4_0) return sim::WeightType::kQ4_0;
    if (type == formats::TensorType::kBF16 || type == formats::TensorType::kF16)
        return sim::WeightType::kBf16;
    return make_error(ErrorCode::kInvalidArgument,
                      "the simulated backend models bf16/f16, q8_0 and q4_0 weights; write the "
                      "model with one of those (pagoda model make-test --dtype q8_0)");
}

// Runs `reqs` through the engine to the end; returns the stats before and after.
Result<std::pair<engine::EngineStats, engine::EngineStats>> run_batch(
    engine::Engine& eng, std::vector<engine::Request> reqs) {
    const engine::EngineStats before = *eng.stats();
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    for (auto& r : reqs) {
        PAGODA_ASSIGN_OR_RETURN(auto s, eng.submit(std::move(r)));
        streams.push_back(std::move(s));
    }
    for (auto& s : streams) {
        engine::Event ev;
        while (s->next(ev)) {
        }
    }
    // The stats snapshot is published after the step that finished the last request.
    for (int i = 0; i < 200 && eng.stats()->queue.running + eng.stats()->queue.waiting > 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return std::pair{before, *eng.stats()};
}

engine::Request bench_request(const tokenizer::Vocab& v, int len, int out, int index) {
    engine::Request r;
    r.prompt_ids = synthetic_prompt(v, len, index);
    r.sampling.max_tokens = out;
    r.sampling.temperature = 0;
    r.sampling.ignore_eos = true;
    r.detokenize = false;
    return r;
}

// Measures prefill chunks and decode steps of the CPU engine on `path`: the step rows of
// one measurement set, best of three each.
Result<sim::MeasurementSet> measure_cpu(const CalibrateFlags& f, model::Model& m) {
    EngineFlags ef;
    ef.threads = f.threads;
    ef.kv_memory = "1GiB";
    ef.enable_prefix_caching = false;
    PAGODA_ASSIGN_OR_RETURN(engine::EngineConfig cfg, engine_config(ef));
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> eng, engine::Engine::create(m, cfg));
    const tokenizer::Vocab& v = m.tokenizer().vocab();
    sim::MeasurementSet set;
    set.gpu = f.name;
    set.model = f.measure_cpu;
    set.kv = cfg.kv.dtype;
    PAGODA_ASSIGN_OR_RETURN(set.weights, weight_type_of(m));
    if (f.trace_only) return set;
    int index = 0;
    if (auto warm = run_batch(*eng, {bench_request(v, 64, 4, index++)}); !warm.ok())
        return warm.error();
    const int kReps = 3;
    const std::vector<int> prefills = {16, 64, 256, 1024}, decodes = {1, 2, 4, 8, 16};
    size_t done = 0, total = (prefills.size() + decodes.size()) * kReps;
    for (int p : prefills) {
        double best = INFINITY;
        for (int rep = 0; rep < kReps; ++rep, progress_bar("measuring", ++done, total)) {
            PAGODA_ASSIGN_OR_RETURN(auto st, run_batch(*eng, {bench_request(v, p, 1, index++)}));
            const double s = st.second.total_time.total() - st.first.total_time.total();
            best =
                std::min(best, s / double(std::max<uint64_t>(1, st.second.steps - st.first.steps)));
        }
        set.steps.push_back({1, p, 0, best * 1000, "a prefill chunk", {}});
    }
    const int prompt = 32, out = 48;
    for (int n : decodes) {
        double best = INFINITY;
        for (int rep = 0; rep < kReps; ++rep, progress_bar("measuring", ++done, total)) {
            std::vector<engine::Request> reqs;
            for (int i = 0; i < n; ++i) reqs.push_back(bench_request(v, prompt, out, index++));
            PAGODA_ASSIGN_OR_RETURN(auto st, run_batch(*eng, std::move(reqs)));
            const double s = st.second.decode_steps_s - st.first.decode_steps_s;
            const int64_t toks = st.second.decode_steps_tokens - st.first.decode_steps_tokens;
            if (toks > 0) best = std::min(best, s / (double(toks) / n));
        }
        set.steps.push_back({n, 1, prompt + out / 2, best * 1000, "decode steps", {}});
    }
    return set;
}

std::string now_utc() {
    char when[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
    return when;
}

// A card for this machine's CPU: its peaks are 1.5 x the best rates its own steps reached (a
// CPU has no datasheet figure the engine reaches; the headroom lets the fitted efficiencies
// stay below 1), memory its RAM.
Result<sim::GpuSpec> cpu_card(const sim::MeasurementSet& set, const sim::SimShape& shape) {
    sim::GpuSpec g;
    g.name = set.gpu;
    g.description = "this machine's CPU, as pagoda's CPU engine runs it";
    g.interconnect = "none";
    g.source = set.source;
    g.bf16_tflops = g.memory_tbps = 1;
    g.link_gbps = 1;
    g.memory_mib = int64_t(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE) >> 20;
    PAGODA_ASSIGN_OR_RETURN(
        sim::PerfModel pm,
        sim::PerfModel::create(g, shape, 1, set.weights, set.kv, {1, 1, 1, 0, 1, 1, 0}));
    double flops = 0, bytes = 0;
    for (const sim::StepMeasurement& m : set.steps) {
        const sim::StepCost c = pm.step(m.batch());
        flops = std::max(flops, c.flops / (m.ms / 1000));
        bytes = std::max(bytes, c.bytes_per_gpu / (m.ms / 1000));
    }
    g.bf16_tflops = 1.5 * flops / 1e12;
    g.memory_tbps = 1.5 * bytes / 1e12;
    return g;
}

std::string card_toml(const sim::GpuSpec& g, const sim::Efficiency& e) {
    return fmt::format(
        "[{}]\ndescription = \"{}\"\nbf16_tflops = {:.6g}\nfp8_tflops = {:.6g}\nmemory_mib = {}\n"
        "memory_tbps = {:.6g}\ninterconnect = \"{}\"\nlink_gbps = {:.6g}\nlink_latency_us = "
        "{:.6g}\nefficiency_compute = {:.4f}\nefficiency_memory = {:.4f}\nefficiency_network = "
        "{:.4f}\nstep_overhead_ms = {:.4f}\nefficiency_overlap = {:.4f}\nefficiency_attention = "
        "{:.4f}\nseq_overhead_ms = {:.4f}\nsource = \"{}\"\n\n",
        g.name, g.description, g.bf16_tflops, g.fp8_tflops, g.memory_mib, g.memory_tbps,
        g.interconnect, g.link_gbps, g.link_latency_us, e.compute, e.memory, e.network,
        e.step_overhead_ms, e.overlap, e.attention, e.seq_overhead_ms, g.source);
}

void print_fit(const std::vector<sim::MeasurementSet>& sets, const sim::FitResult& before,
               const sim::FitResult& after, bool fitted) {
    std::printf("%-10s %-22s %6s %6s %8s %11s %11s %8s\n", "card", "model", "seqs", "tokens",
                "context", "measured ms", fitted ? "fitted ms" : "model ms", "error");
    // (for a mixed batch: its sequences, all their new tokens and their mean context)
    for (size_t i = 0; i < after.rows.size(); ++i) {
        const sim::FitRow& r = after.rows[i];
        const sim::MeasurementSet& s = sets[r.set];
        const sim::StepMeasurement& m = s.steps[r.row];
        std::string model =
            s.model.size() > 22 ? "..." + s.model.substr(s.model.size() - 19) : s.model;
        // A mixed batch: its sequences, all their new tokens, their mean context.
        int seqs = m.seqs, tokens = m.new_tokens;
        int64_t context = m.context;
        if (!m.mix.empty()) {
            seqs = int(m.mix.size());
            tokens = 0;
            context = 0;
            for (const sim::SeqWork& w : m.mix) {
                tokens += w.new_tokens;
                context += w.context;
            }
            context /= seqs;
        }
        std::printf("%-10s %-22s %6d %6d %8lld %11.3f %11.3f %+7.1f%%\n", s.gpu.c_str(),
                    model.c_str(), seqs, tokens, (long long)context, m.ms, r.predicted_ms,
                    100 * r.rel_error());
    }
    const sim::Efficiency& e = after.efficiency;
    if (fitted) {
        std::printf("before the fit: rms error %.1f%%, max %.1f%%\n", 100 * before.rms_rel_error,
                    100 * before.max_abs_rel_error);
    }
    std::printf("%s: rms error %.1f%%, max %.1f%%\n", fitted ? "after the fit" : "error",
                100 * after.rms_rel_error, 100 * after.max_abs_rel_error);
    std::printf(
        "efficiency: compute %.4f, memory %.4f, network %.4f, step overhead %.4f ms, overlap "
        "%.4f, attention %.4f\n",
        e.compute, e.memory, e.network, e.step_overhead_ms, e.overlap, e.attention);
}

int run_calibrate(const CalibrateFlags& f) {
    auto go = [&]() -> Status {
        PAGODA_ASSIGN_OR_RETURN(sim::FitFactors factors, parse_factors(f.fit));
        if (!f.measure_cpu.empty()) factors.overlap = factors.attention = true;
        if (!f.step_trace.empty() && f.measure_cpu.empty()) {
            return make_error(ErrorCode::kInvalidArgument,
                              "--step-trace needs --measure-cpu MODEL, the model the trace ran");
        }
        std::vector<sim::MeasurementSet> sets;
        std::vector<sim::SetModel> models;
        std::map<std::string, sim::GpuSpec> measured_cards;
        auto add = [&](std::vector<sim::MeasurementSet> more) -> Status {
            for (auto& s : more) {
                sim::SetModel sm;
                PAGODA_ASSIGN_OR_RETURN(sm.shape, shape_of(s.model));
                auto card = measured_cards.find(s.gpu);
                if (card != measured_cards.end()) {
                    sm.gpu = card->second;
                } else {
                    PAGODA_ASSIGN_OR_RETURN(sm.gpu, sim::find_gpu(s.gpu, f.gpu_table));
                }
                models.push_back(sm);
                sets.push_back(std::move(s));
            }
            return ok_status();
        };
        if (!f.measure_cpu.empty()) {
            PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<model::Model> m,
                                    model::Model::load(f.measure_cpu));
            PAGODA_ASSIGN_OR_RETURN(sim::MeasurementSet set, measure_cpu(f, *m));
            set.source = fmt::format(
                "measured by pagoda sim calibrate --measure-cpu on this machine, {}, {} "
                "threads: {}",
                now_utc(), std::thread::hardware_concurrency(),
                f.trace_only ? "served steps of --step-trace " + f.step_trace
                : f.step_trace.empty()
                    ? std::string("prefill chunks and decode batches, the engine's own timings")
                    : "prefill chunks and decode batches, and served steps of --step-trace " +
                          f.step_trace);
            if (!f.step_trace.empty()) {
                PAGODA_ASSIGN_OR_RETURN(std::string text, read_text(f.step_trace));
                PAGODA_ASSIGN_OR_RETURN(auto rows, sim::parse_step_trace(text, f.step_trace, 2000));
                set.steps.insert(set.steps.end(), rows.begin(), rows.end());
            }
            PAGODA_ASSIGN_OR_RETURN(sim::SimShape shape, shape_of(f.measure_cpu));
            PAGODA_ASSIGN_OR_RETURN(measured_cards[set.gpu], cpu_card(set, shape));
            PAGODA_TRY(add({set}));
        }
        for (const std::string& path : f.measurements) {
            PAGODA_ASSIGN_OR_RETURN(std::string text, read_text(path));
            PAGODA_ASSIGN_OR_RETURN(auto more, sim::parse_measurements(text, path));
            PAGODA_TRY(add(std::move(more)));
        }
        if (f.published || sets.empty()) {
            PAGODA_ASSIGN_OR_RETURN(
                auto more,
                sim::parse_measurements(sim::published_measurements(), "published.toml"));
            PAGODA_TRY(add(std::move(more)));
        }
        // Start from the first set's card factors (the shipped ones for a table card).
        const sim::Efficiency start = models[0].gpu.efficiency;
        PAGODA_ASSIGN_OR_RETURN(sim::FitResult before, sim::evaluate(sets, models, start));
        sim::FitResult after = before;
        if (!f.no_fit) {
            PAGODA_ASSIGN_OR_RETURN(after, sim::fit(sets, models, start, factors));
        }
        print_fit(sets, before, after, !f.no_fit);
        if (!f.save_measurements.empty()) {
            std::ofstream(f.save_measurements) << sim::measurements_toml(sets);
            std::printf("measurements written to %s\n", f.save_measurements.c_str());
        }
        if (!f.output.empty()) {
            std::string out =
                "# GPU table written by pagoda sim calibrate: the cards of the measurements with "
                "the fitted\n# efficiency factors. Use: pagoda serve --backend sim "
                "--sim-gpu-table THIS_FILE --sim-gpu NAME\n\n";
            std::map<std::string, bool> seen;
            for (const sim::SetModel& sm : models) {
                if (!seen[sm.gpu.name]) out += card_toml(sm.gpu, after.efficiency);
                seen[sm.gpu.name] = true;
            }
            std::ofstream(f.output) << out;
            std::printf("GPU table written to %s\n", f.output.c_str());
        }
        return ok_status();
    };
    Status st = go();
    if (!st.ok()) {
        std::fprintf(stderr, "error: %s\n", st.error().message.c_str());
        return st.error().code == ErrorCode::kInvalidArgument ||
                       st.error().code == ErrorCode::kNotFound
                   ? 2
                   : 1;
    }
    return 0;
}

}  // namespace

void add_sim(CLI::App& app, std::function<int()>& action) {
    CLI::App* c = app.add_subcommand("sim", "Tools of the simulated GPU backend");
    c->require_subcommand(1);
    auto f = std::make_shared<CalibrateFlags>();
    CLI::App* cal = c->add_subcommand(
        "calibrate",
        "Fit the performance model's efficiency factors to measured step times and print the "
        "fit error: published vLLM measurements (the default), a measurement file, or this "
        "machine's CPU engine measured now");
    cal->add_option("--measurements", f->measurements,
                    "TOML file of measured step times (format: src/model/sim/calibrate.h); "
                    "repeatable")
        ->check(CLI::ExistingFile);
    cal->add_flag("--published", f->published,
                  "Include the published vLLM measurements shipped with pagoda "
                  "(src/model/sim/published.toml; used when no other input is given)");
    cal->add_option("--measure-cpu", f->measure_cpu,
                    "Run this GGUF model on the CPU engine (prefill chunks and decode batches), "
                    "and fit a card for this machine")
        ->check(CLI::ExistingFile);
    cal->add_option("--step-trace", f->step_trace,
                    "Steps the CPU engine served (pagoda serve --step-trace FILE) of the "
                    "--measure-cpu model, fitted with the measured ones (at most 2000, evenly "
                    "spaced)")
        ->check(CLI::ExistingFile);
    cal->add_flag("--trace-only", f->trace_only,
                  "With --step-trace: fit the served steps only, measure nothing");
    cal->add_option("--name", f->name, "Card name for --measure-cpu")->capture_default_str();
    cal->add_option("--threads", f->threads, "Compute threads for --measure-cpu (0 = all)");
    cal->add_option("--fit", f->fit,
                    "Factors to fit, comma-separated: compute, memory, overhead, network, overlap, "
                    "attention (--measure-cpu adds overlap and attention: a CPU does not hide "
                    "memory time under compute, and its attention runs slower than its matmuls)")
        ->capture_default_str();
    cal->add_flag("--no-fit", f->no_fit, "Only report the error of the current factors");
    cal->add_option("--sim-gpu-table", f->gpu_table, "Extra GPU table for the sets' cards")
        ->check(CLI::ExistingFile);
    cal->add_option("-o,--output", f->output,
                    "Write the cards with the fitted factors as a GPU table (for pagoda serve "
                    "--sim-gpu-table)");
    cal->add_option("--save-measurements", f->save_measurements,
                    "Write the measurements (including --measure-cpu's) as a measurement file");
    cal->callback([f, &action] { action = [f] { return run_calibrate(*f); }; });
    add_sim_predict(c, action);
    add_sim_loaded(c, action);
}

}  // namespace pagoda::app
