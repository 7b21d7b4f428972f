#pragma once
// Runs a plan against one or two OpenAI-compatible endpoints: streams every request over the
// async client, timestamps each token chunk, keeps the open-loop schedule (and measures how
// late it was), applies the stop condition, and scrapes /metrics before and after.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "bench/stats.h"
#include "bench/workload.h"
#include "http/client.h"

namespace pagoda::bench {

struct Target {
    std::string url;
    std::unique_ptr<http::Client> client;
    std::string model;             // what requests ask for
    int64_t max_model_len = 0;     // 0 = not reported
    std::string info_json = "{}";  // /v1/models entry and config info from /metrics
};

// Connects and asks /v1/models (the model, unless one is given). Errors say the server is
// unreachable or not OpenAI-compatible. timeout_s is the longest silence one request may
// meet (a request queued on an overloaded server waits this long for its first byte).
Result<Target> connect_target(const std::string& url, const std::string& api_key,
                              const std::string& model, double timeout_s);

// A token counter backed by the server's /tokenize (vLLM and Pagoda shape, or llama.cpp's);
// nullopt-like empty function when the server has none.
TokenCounter server_token_counter(Target& t);
// About four characters a token (used when no tokenizer is available; lengths are then
// approximate).
TokenCounter approximate_token_counter();

// Prometheus text -> series name (with labels) -> value.
std::map<std::string, double> scrape_metrics(Target& t);
// Deltas of histograms (count, mean) and counters between two scrapes, as JSON text.
std::string metric_deltas_json(const std::map<std::string, double>& before,
                               const std::map<std::string, double>& after);

struct RunOptions {
    bool progress = false;              // live line on stderr
    double sample_every_s = 1;          // scrape the first target's /metrics this often (0: no)
    std::function<bool()> interrupted;  // polled; true stops sending (Ctrl-C)
    std::string label;                  // shown in the progress line
};

// The timeline's gauges out of one scrape.
std::map<std::string, double> timeline_gauges(const std::map<std::string, double>& scrape);
// The server's busy fraction between two scrapes over `seconds` of run: the rate of
// pagoda_sim_busy_seconds_total (modelled GPU time), else of pagoda_compute_busy_seconds_total
// (forward passes); NaN when the server exports neither (Report's busy_ratio).
double busy_ratio(const std::map<std::string, double>& before,
                  const std::map<std::string, double>& after, double seconds);

struct RunResult {
    std::vector<ServerSample> server;
    std::vector<RequestRecord> records;
    double duration_s = 0;
    std::string aborted;
};

// Sends the plan (request i goes to targets[i % targets.size()]) and waits for every answer.
RunResult run_plan(const Scenario& s, const std::vector<PlannedRequest>& plan,
                   std::vector<Target*> targets, const RunOptions& opts);

}  // namespace pagoda::bench
