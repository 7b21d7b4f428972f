#pragma once
// The flags of `pagoda bench` and the scenario they describe: a scenario file, a preset, a
// trace (with its speed, rate and length scales and the over-long policy) or a quick run,
// with the overrides the command line adds. Used only by apps/.

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "bench/scenario.h"

namespace CLI {
class App;
}

namespace pagoda::app {

struct BenchFlags {
    std::string url = "http://127.0.0.1:8000";
    std::string api_key, model, scenario_file, preset_name, endpoint;
    std::string trace;  // --trace FILE
    double speed = 1, rate_scale = 1, length_scale = 1;
    std::string on_overlong;  // error | skip | clamp; empty = the scenario's (error)
    std::string trace_model;  // BurstGPT: only this Model's rows
    std::string time_window;  // "10m-40m", "7d5h-7d9h", "2h-": trace time after the first request
    double rate = 0;
    int concurrency = 0;
    std::string process = "poisson";
    double burstiness = 1;
    std::string duration, warmup, cooldown, timeout;
    int64_t requests = 0;
    int64_t input_len = 0, output_len = 0;
    double scale = 1;
    int64_t seed = -1;
    std::vector<std::string> criteria;
    std::string tokenizer;
    std::string json_out, html_out, requests_out;
    std::string db;
    bool no_record = false;
    std::string save_baseline, compare;
    int repeat = 1;
    double tolerance = 0.05;
    std::vector<std::string> compare_endpoints;
    bool no_progress = false;
    // history
    int history_limit = 20;
    // sweep
    std::vector<double> rates;
    double min_goodput = 0.9;
};

// The scenario the flags describe; errors say which flags conflict and what is allowed.
Result<bench::Scenario> build_scenario(const BenchFlags& f);
// The flags that describe the load (--url, --scenario, --preset, --trace, --rate, ...).
void add_load_flags(CLI::App* c, BenchFlags& f);

}  // namespace pagoda::app
