// `pagoda rehearse`: replays a compressed production day (built in, or a trace) on the
// virtual-clock fleet in three arms (defaults, best_static, control) and prints, writes as
// JSON and as an HTML report what each gave (src/rehearse/rehearse.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>

#include "apps/cli_common.h"
#include "apps/commands.h"
#include "apps/fleet_file.h"
#include "rehearse/rehearse.h"
#include "rehearse/sim_check.h"

namespace pagoda::app {

namespace {

struct RehearseFlags {
    std::string trace, day = "builtin", slo = "p99_ttft_ms<800,p99_tpot_ms<100";
    std::string faults, json_out, html_out, fleet;
    double compress = 96, hours = 0, peak_rps = 20;
    uint64_t seed = 1;
    rehearse::RehearseOptions o;
    bool quiet = false;
};

Status write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    if (!out) return make_error(ErrorCode::kIo, "cannot write {}", path);
    return ok_status();
}

// A fleet file's first pool with a profile (a sized one first): its sim card and model,
// and its sizing for the control arm.
Status apply_fleet(const std::string& path, rehearse::RehearseOptions& o) {
    PAGODA_ASSIGN_OR_RETURN(FleetFile ff, load_fleet_file(path));
    const router::PoolConfig* pick = nullptr;
    for (const auto& p : ff.router.pools) {
        if (!p.profile.empty() && (!pick || (p.sized() && !pick->sized()))) pick = &p;
    }
    if (!pick) return make_error(ErrorCode::kInvalidArgument, "{}: no pool runs a profile", path);
    const std::vector<std::string>& args = ff.profiles.at(pick->profile).args;
    for (size_t i = 0; i + 1 < args.size(); ++i) {
        if (args[i] == "--sim-gpu") o.gpu = args[i + 1];
        if (args[i] == "--sim-model") o.model = args[i + 1];
    }
    if (pick->sized()) {
        const auto& z = pick->sizing;
        control::PoolSizingConfig c;
        c.min_replicas = z.min_replicas;
        c.max_replicas = z.max_replicas;
        c.replica_rps = z.replica_rps;
        c.target_waiting = z.target_waiting;
        c.ttft_slo_s = z.ttft_slo_ms > 0 ? z.ttft_slo_ms / 1000 : o.slo.ttft_s;
        c.cold_start_s = z.cold_start_s;
        c.up_cooldown_s = z.up_cooldown_s;
        c.down_cooldown_s = z.down_cooldown_s;
        c.down_stabilisation_s = z.down_stabilisation_s;
        c.idle_to_zero_s = z.idle_to_zero_s;
        o.pool = c;
        o.max_replicas = z.max_replicas;
        o.cold_start_s = z.cold_start_s;
    }
    return ok_status();
}

int run_rehearse(RehearseFlags& f) {
    auto slo = rehearse::parse_slo(f.slo);
    if (!slo) return fail(slo.error());
    f.o.slo = *slo;
    if (!f.fleet.empty()) {
        if (Status st = apply_fleet(f.fleet, f.o); !st.ok()) return fail(st.error());
    }
    if (!f.faults.empty()) {
        auto faults = rehearse::load_faults(f.faults);
        if (!faults) return fail(faults.error());
        f.o.faults = *faults;
    }
    rehearse::Day day;
    std::vector<double> forecast;
    if (!f.trace.empty()) {
        auto d = rehearse::trace_day(f.trace, f.compress, f.hours, f.o.max_model_len);
        if (!d) return fail(d.error());
        day = std::move(*d);
        // No yesterday for a trace: the control arm sizes on live signals only.
    } else {
        if (f.day != "builtin") {
            return fail(Error{ErrorCode::kInvalidArgument,
                              "--day: only 'builtin' is built in; give a trace with --trace"});
        }
        rehearse::BuiltinDayOptions b{f.peak_rps, f.compress, f.seed, 3, f.o.max_model_len};
        day = rehearse::builtin_day(b);
        b.seed = f.seed + 1000;  // yesterday: same shape, other draws and bursts
        forecast = rehearse::smooth(rehearse::builtin_day(b).rate_per_min, 15);
    }
    if (!f.quiet) {
        f.o.progress = [](const std::string& line) {
            std::fprintf(stderr, "  %s\n", line.c_str());
        };
    }
    auto r = rehearse::rehearse(day, forecast, f.o);
    if (!r) return fail(r.error());
    std::fputs(rehearse::text_report(*r, f.o).c_str(), stdout);
    if (!f.json_out.empty()) {
        if (Status st = write_file(f.json_out, r->to_json(f.o).dump(2) + "\n"); !st.ok()) {
            return fail(st.error());
        }
    }
    if (!f.html_out.empty()) {
        if (Status st = write_file(f.html_out, rehearse::html_report(*r, f.o)); !st.ok()) {
            return fail(st.error());
        }
    }
    return 0;
}

}  // namespace

void add_rehearse(CLI::App& app, std::function<int()>& action) {
    auto f = std::make_shared<RehearseFlags>();
    CLI::App* c = app.add_subcommand(
        "rehearse",
        "Replay a compressed production day on a simulated fleet (virtual clock) and compare "
        "three arms on the same arrivals: vLLM's defaults, the best static configuration and "
        "replica count for the day, and Pagoda's control loop (pool sizing from the forecast "
        "and live signals, drain-safe scale-down)");
    c->add_option("--trace", f->trace,
                  "A trace in any format `pagoda bench --trace` reads (instead of the built-in "
                  "day)")
        ->check(CLI::ExistingFile);
    c->add_option("--day", f->day, "The built-in day")->capture_default_str();
    c->add_option("--fleet", f->fleet,
                  "A fleet file: its (sized) pool's sim card and model (--sim-gpu, --sim-model "
                  "of its profile) and sizing (min/max_replicas, cooldowns, cold_start_s) for "
                  "the control arm")
        ->check(CLI::ExistingFile);
    c->add_option("--hours", f->hours, "With --trace: replay only this many hours from its start");
    c->add_option("--peak-rps", f->peak_rps, "The built-in day's plateau rate (requests/s)")
        ->capture_default_str()
        ->check(CLI::Range(0.01, 1e5));
    c->add_option("--compress", f->compress,
                  "Play each stretch of the day at its own rate for 1/N of its length (a trace "
                  "keeps every N-th request); the control plane's time constants shrink with it")
        ->capture_default_str()
        ->check(CLI::Range(1.0, 3600.0));
    c->add_option("--slo", f->slo,
                  "The SLO: p99_ttft_ms<MS,p99_tpot_ms<MS[,attainment=0.99] (a request meets "
                  "it when both hold; p99 means 99% of requests must)")
        ->capture_default_str();
    c->add_option("--faults", f->faults,
                  "Fault schedule (TOML: [[fault]] kind = \"kill\" | \"slow\", at = \"HH:MM\", "
                  "duration = \"10m\", factor = 3)")
        ->check(CLI::ExistingFile);
    c->add_option("--sim-gpu", f->o.gpu, "The simulated card (pagoda sim calibrate lists them)")
        ->capture_default_str();
    c->add_option("--sim-model", f->o.model, "The modelled shape (llama-3-8b, llama-3-70b, ...)")
        ->capture_default_str();
    c->add_option("--cold-start", f->o.cold_start_s,
                  "Seconds from a replica's start to ready (weights, full warmup)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 3600.0));
    c->add_option("--max-replicas", f->o.max_replicas, "Most replicas any arm may run")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    c->add_option("--seed", f->seed, "The built-in day's draws")->capture_default_str();
    c->add_option("--json", f->json_out, "Write the result as JSON");
    c->add_option("--html", f->html_out, "Write the HTML report with the day's curves");
    c->add_flag("-q,--quiet", f->quiet, "No progress lines");
    c->callback([f, &action] { action = [f] { return run_rehearse(*f); }; });
}

void add_sim_loaded(CLI::App* sim_cmd, std::function<int()>& action) {
    auto fit = std::make_shared<bool>(false);
    auto overhead = std::make_shared<double>(-1);
    CLI::App* c = sim_cmd->add_subcommand(
        "loaded",
        "The simulated GPU under load against published serving figures (vLLM 0.6.0, "
        "Llama-3.1-8B on an A100, 70B on 4 H100s, ShareGPT at 4 and 8 req/s and offline): "
        "each replayed in virtual time, median TTFT and TPOT or throughput beside the "
        "published ones, with the error");
    c->add_flag("--fit", *fit,
                "Fit the overhead per sequence per step on the points marked fit (the others "
                "are held out)");
    c->add_option("--seq-overhead-ms", *overhead,
                  "Overhead per sequence per step to model (default: the card's)")
        ->check(CLI::Range(0.0, 100.0));
    c->callback([fit, overhead, &action] {
        action = [fit, overhead] {
            const auto points = rehearse::published_loaded_points();
            double o = *overhead;
            if (*fit) {
                auto f = rehearse::fit_seq_overhead(points);
                if (!f) return fail(f.error());
                o = *f;
            }
            if (o < 0) {
                auto g = model::sim::find_gpu(points[0].gpu);
                if (!g) return fail(g.error());
                o = g->efficiency.seq_overhead_ms;
            }
            auto rows = rehearse::check_points(points, o);
            if (!rows) return fail(rows.error());
            std::fputs(rehearse::points_table(*rows, o).c_str(), stdout);
            return 0;
        };
    });
}

}  // namespace pagoda::app
