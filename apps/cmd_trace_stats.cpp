// `pagoda bench trace-stats FILE`: a trace's rate per minute, length percentiles,
// burstiness and prefix sharing, printed or as JSON (src/bench/trace_stats.h).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "apps/commands.h"
#include "bench/trace_stats.h"

namespace pagoda::app {

namespace {

struct TraceStatsFlags {
    std::string file;
    std::string model;
    bool json = false;
};

int run_trace_stats(const TraceStatsFlags& f) {
    auto t = bench::read_trace_file(f.file, bench::TraceReadOptions{f.model});
    if (!t.ok()) {
        std::fprintf(stderr, "error: %s\n", t.error().message.c_str());
        return 2;
    }
    const nlohmann::json s = bench::trace_stats(*t);
    if (f.json) {
        std::printf("%s\n", s.dump(2).c_str());
    } else {
        std::printf("%s", bench::trace_stats_text(s).c_str());
    }
    return 0;
}

}  // namespace

void add_trace_stats(CLI::App* bench_cmd, std::function<int()>& action) {
    auto f = std::make_shared<TraceStatsFlags>();
    CLI::App* c = bench_cmd->add_subcommand(
        "trace-stats",
        "A trace's rate per minute, length percentiles, burstiness and prefix sharing (any "
        "format --trace reads)");
    c->add_option("file", f->file, "The trace file")->required()->check(CLI::ExistingFile);
    c->add_option("--trace-model", f->model, "BurstGPT: only the rows of this Model");
    c->add_flag("--json", f->json, "Print JSON (with the rate of every minute)");
    c->callback([f, &action] { action = [f] { return run_trace_stats(*f); }; });
}

}  // namespace pagoda::app
