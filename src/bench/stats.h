#pragma once
// Statistics of a load run: per-request records in, per-class and overall summaries, a
// per-second series, acceptance verdicts and significance tests out. Definitions are the
// ones in docs/metrics.md ("pagoda bench").

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "bench/scenario.h"
#include "metrics/significance.h"

namespace pagoda::bench {

// One request as the client saw it. Times are seconds from the run's start.
struct RequestRecord {
    int klass = 0;
    int target = 0;               // endpoint index (0, or 0/1 with --compare-endpoints)
    double scheduled_s = 0;       // when it should have been sent (closed loop: when it was)
    double sent_s = -1;           // when the request was written
    double first_token_s = -1;    // first chunk carrying a token
    double done_s = -1;           // response complete or failed
    std::vector<double> token_s;  // every token chunk
    int64_t target_input = 0, target_output = 0;
    int64_t prompt_tokens = -1, completion_tokens = -1;  // server's usage; -1 = not reported
    int status = 0;                                      // HTTP status, 0 = none
    int retries = 0;  // sent again on a fresh connection after a stale keep-alive one
    std::string
        error_kind;  // empty = success; connect, timeout, io, protocol, http_4xx, http_5xx, stream
    std::string error;

    bool ok() const { return error_kind.empty(); }
    int64_t output_tokens() const {
        return completion_tokens >= 0 ? completion_tokens : int64_t(token_s.size());
    }
    double ttft_ms() const { return (first_token_s - sent_s) * 1000; }
    double e2e_ms() const { return (done_s - sent_s) * 1000; }
    // (e2e - ttft) / (output tokens - 1); NaN for one token.
    double tpot_ms() const;
};

// Linear interpolation between closest ranks (numpy's default). q in [0, 1]; NaN when empty.
double percentile_sorted(const std::vector<double>& sorted, double q);

struct Summary {
    size_t n = 0;
    double mean = 0, stddev = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0, p999 = 0, max = 0;
};
Summary summarize(std::vector<double> values);

struct Stats {
    std::string name;  // class name, or "overall"
    int64_t sent = 0, completed = 0, failed = 0;
    Summary ttft, itl, tpot,
        e2e;            // milliseconds; itl pools every gap (token-weighted), tpot is per request
    double span_s = 0;  // first send to last completion of the counted requests
    double requests_per_s = 0, output_tokens_per_s = 0, input_tokens_per_s = 0;
    double goodput_rps = 0, goodput_ratio = 0, error_rate = 0, latency_fluctuation = 0;
    // The server's busy fraction over the run (overall only: the modelled GPU time of a sim
    // replica, else the compute pool's forward time, per second of the run); NaN unknown.
    double busy_ratio = std::numeric_limits<double>::quiet_NaN();
    int64_t output_tokens = 0, input_tokens = 0;
    std::map<std::string, int64_t> errors;  // by kind
};

// NaN when the metric has no data.
double metric_value(const Stats& s, const std::string& metric);
// True when a larger value is better (throughput, goodput); false for latencies and errors.
bool higher_is_better(const std::string& metric);

struct SecondBucket {
    int64_t sent = 0, completed = 0, errors = 0, in_flight = 0, output_tokens = 0;
    double ttft_mean_ms = 0;  // of requests whose first token came in this second; 0 if none
};

// One scrape of the first target during the run: the gauges of the server timeline
// (waiting and running requests, KV use, warm level, the rate forecast), by short name.
struct ServerSample {
    double t_s = 0;
    std::map<std::string, double> v;
};

struct CriterionResult {
    Criterion criterion;
    double value = 0;
    bool pass = false;
};

// Does a finished request meet every SLO of its class? Failed requests never do.
bool meets_slo(const RequestRecord& r, const Slo& slo);

struct Report {
    std::string scenario, scenario_hash, url, model, started_at;
    double duration_s = 0;                        // measured wall time of the run
    double window_begin_s = 0, window_end_s = 0;  // requests scheduled in here are counted
    Stats overall;
    std::vector<Stats> classes;
    std::vector<SecondBucket> series;
    std::vector<ServerSample> server;  // the first target's timeline (target 0's report only)
    std::vector<CriterionResult> criteria;
    std::string verdict = "none";                  // pass, fail, none
    int64_t trace_skipped = 0, trace_clamped = 0;  // trace requests over max_model_len
    // Client honesty: how late requests were sent against their schedule.
    double send_lag_p50_ms = 0, send_lag_p99_ms = 0, send_lag_max_ms = 0;
    int64_t late_sends = 0;  // more than 10 ms late
    int64_t retries = 0;     // requests sent again after a stale keep-alive connection
    bool client_saturated = false;
    std::string aborted;  // why the run stopped early; empty = it did not
    int64_t prompts_exact = 0, prompts_synthesised = 0;
    int64_t usage_mismatches = 0;            // token chunks counted != usage.completion_tokens
    std::string server_metrics_json = "{}";  // deltas of the target's /metrics over the run
    std::string server_info_json = "{}";
};

// Builds the statistics for requests of one target (`target` index) from a scenario's records.
Report build_report(const Scenario& s, const std::vector<RequestRecord>& records,
                    double run_duration_s, int target = 0);
// Evaluates the scenario's criteria into report.criteria and report.verdict.
void evaluate_criteria(const Scenario& s, Report& report);

// Mann-Whitney U and the 95% confidence half-width live in metrics/significance.h (the
// router's canary judge uses them too).
using metrics::ci95_half_width;
using metrics::mann_whitney;
using metrics::MannWhitney;

// Baseline comparison of repeated runs: mean, 95% confidence half-width, relative delta and
// a verdict per metric. A change is a regression when it is worse than both the tolerance and
// the noise band (the combined confidence half-widths, relative to the baseline mean).
struct MetricDelta {
    std::string metric;
    double base_mean = 0, base_ci = 0, cur_mean = 0, cur_ci = 0;
    double delta_rel = 0;   // (cur - base) / base
    double noise_band = 0;  // relative
    std::string verdict;    // ok, improved, regression, n/a
};
std::vector<MetricDelta> compare_runs(const std::vector<std::map<std::string, double>>& baseline,
                                      const std::vector<std::map<std::string, double>>& current,
                                      double tolerance);
// The metrics a baseline stores and compares.
const std::vector<std::string>& baseline_metrics();
std::map<std::string, double> baseline_values(const Report& r);

}  // namespace pagoda::bench
