#pragma once
// A load scenario: when requests are sent (the arrival process), what they look like
// (request classes with length distributions and SLOs), how long the run lasts, and the
// acceptance criteria. Loaded from TOML (errors carry file, line and reason), built from
// quick-run flags, or taken from a built-in preset.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace pagoda::bench {

// A length distribution in tokens. Samples are rounded and clamped to [min, max].
struct LengthDist {
    enum class Kind { kFixed, kUniform, kNormal, kLogNormal, kEmpirical };
    Kind kind = Kind::kFixed;
    double value = 128;           // fixed
    double low = 1, high = 1;     // uniform (inclusive)
    double mean = 0, stddev = 0;  // normal; log-normal: of the length itself, not its log
    std::vector<int64_t> values;  // empirical: sampled uniformly
    int64_t min = 1, max = 1 << 20;

    double expected() const;  // the distribution's mean before clamping
    void scale(double f);     // multiplies every length parameter by f (>= 1 token)
};

struct Slo {
    std::optional<double> ttft_ms, tpot_ms, itl_ms, e2e_ms;
    bool empty() const { return !ttft_ms && !tpot_ms && !itl_ms && !e2e_ms; }
};

struct RequestClass {
    std::string name = "default";
    double weight = 1;
    LengthDist input, output;
    Slo slo;
    std::string dataset;  // JSONL with "prompt" (and optional "output_len"); empty = synthesise
};

// One stretch of the schedule.
struct Phase {
    enum class Process { kConstant, kPoisson, kGamma };
    Process process = Process::kPoisson;
    double rate = 1;        // requests per second
    double burstiness = 1;  // gamma shape: 1 = Poisson, < 1 burstier, > 1 smoother
    double duration_s = 0;  // 0 = until the run's limit (last phase only)
};

struct Arrival {
    enum class Kind { kOpen, kClosed, kTrace };
    Kind kind = Kind::kOpen;
    std::vector<Phase> phases;  // open loop: one or more, in order
    int concurrency = 0;        // closed loop: requests kept in flight
    std::string
        trace;  // trace replay: JSONL with timestamp, input_len, output_len[, prompt, class]
    double trace_speed = 1;         // > 1 replays faster (wall time compressed)
    double trace_rate_scale = 1;    // arrival rates x this (gaps divided), --rate-scale
    double trace_length_scale = 1;  // input and output lengths x this, --length-scale
    // --time-window: replay only [from, to) seconds after the trace's first timestamp
    // (trace time, before --speed); the replay starts at `from`. to <= 0: to the end.
    double trace_window_from_s = 0, trace_window_to_s = 0;
    std::string trace_model;  // BurstGPT: keep only rows of this Model (--trace-model)
    // Requests longer than the server's context: refuse the run (error), leave them out
    // (skip), or shorten the prompt keeping the output (clamp).
    enum class Overlong { kError, kSkip, kClamp };
    Overlong on_overlong = Overlong::kError;
};

struct Criterion {
    std::string text;    // as written, e.g. "short: p99_ttft_ms < 800"
    std::string klass;   // empty = overall
    std::string metric;  // e.g. "p99_ttft_ms"
    std::string op;      // <, <=, >, >=
    double threshold = 0;
};

// Parses "[class:] metric op number". Metric names are checked against known_metrics().
Result<Criterion> parse_criterion(std::string_view text);
const std::vector<std::string>& known_metrics();

struct Scenario {
    std::string name = "custom";
    std::string endpoint = "completions";  // completions | chat
    std::string model;                     // empty = the server's first model
    double duration_s = 0;                 // 0 = no time limit (then requests must be set)
    int64_t requests = 0;                  // 0 = no count limit
    double warmup_s = 0, cooldown_s = 0;   // excluded from statistics
    uint64_t seed = 1;
    double timeout_s = 600;  // per request
    Arrival arrival;
    std::vector<RequestClass> classes;
    std::vector<Criterion> criteria;
    double stop_error_rate = 0;  // 0 = off; abort when errors / finished passes it (after 20)
    int64_t stop_in_flight = 0;  // 0 = off; abort when in flight passes it
    double window_s = 10;        // for latency_fluctuation

    // Scales rates and lengths (for small machines); shape and durations are kept.
    void scale(double f);
    // Stretches phase durations to a new total duration.
    void set_duration(double seconds);
    // Checks limits and consistency; errors say what is wrong.
    Status validate() const;
    // A stable hash of everything that shapes the load (for baselines).
    std::string hash() const;
};

// Loads a TOML scenario. Errors: "FILE:LINE:COL: KEY: reason".
Result<Scenario> load_scenario_file(const std::string& path);
Result<Scenario> parse_scenario(std::string_view toml_text, const std::string& source_name);

// Built-in presets: 1k, 4k, 32k, 50rps, 200rps, 500rps, mix-70-30, burst.
Result<Scenario> preset(std::string_view name);
std::vector<std::string> preset_names();
std::string preset_help();

// "30s", "2m", "1.5h", "250ms" or a bare number of seconds.
Result<double> parse_duration(std::string_view text);

}  // namespace pagoda::bench
