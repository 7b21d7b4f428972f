// The router's /metrics: the implementation (the contract is in router/router_metrics.h).
#include "router/router_metrics.h"

#include <fmt/format.h>

#include <set>
#include <tuple>
#include <vector>

namespace pagoda::router {

namespace {

// vLLM's bucket bounds for TTFT and end-to-end latency, and for inter-token latency.
std::vector<double> ttft_bounds() {
    return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
            1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> e2e_bounds() {
    return {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
            30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}
std::vector<double> itl_bounds() {
    return {0.001, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1,  0.15, 0.2,
            0.3,   0.4,   0.5,  0.75,  1.0,  2.5,   5.0,  7.5,  10.0, 20.0,  40.0, 80.0};
}

// Samples per (pool, failed backend); a pool with none yet has one zero sample (backend="").
void per_backend(metrics::TextWriter& w, const char* name,
                 const std::map<std::pair<std::string, std::string>, int64_t>& counts,
                 const std::vector<std::string>& pools) {
    std::set<std::string> seen;
    for (const auto& [k, v] : counts) {
        w.sample(name, {{"pool", k.first}, {"backend", k.second}}, double(v));
        seen.insert(k.first);
    }
    for (const auto& p : pools) {
        if (!seen.count(p)) w.sample(name, {{"pool", p}, {"backend", ""}}, 0.0);
    }
}

}  // namespace

RouterMetrics::Series::Series() : ttft(ttft_bounds()), e2e(e2e_bounds()) {}

RouterMetrics::Series& RouterMetrics::series(const std::string& pool, const std::string& backend) {
    std::lock_guard lock(mu_);
    auto& s = series_[{pool, backend}];
    if (!s) s = std::make_unique<Series>();
    return *s;
}

metrics::Histogram& RouterMetrics::itl_of(const std::string& pool) {
    std::lock_guard lock(mu_);
    auto& h = itl_[pool];
    if (!h) h = std::make_unique<metrics::Histogram>(itl_bounds());
    return *h;
}

void RouterMetrics::request(const std::string& pool, const std::string& backend, int code) {
    std::lock_guard lock(mu_);
    ++requests_[{pool, backend, code}];
}
void RouterMetrics::ttft(const std::string& pool, const std::string& backend, double s) {
    series(pool, backend).ttft.observe(s);
}
void RouterMetrics::itl(const std::string& pool, double s) { itl_of(pool).observe(s); }
void RouterMetrics::e2e(const std::string& pool, const std::string& backend, double s) {
    series(pool, backend).e2e.observe(s);
}
void RouterMetrics::retry(const std::string& pool, const std::string& backend) {
    std::lock_guard lock(mu_);
    ++retries_[{pool, backend}];
}
void RouterMetrics::resumption(const std::string& pool, const std::string& backend) {
    std::lock_guard lock(mu_);
    ++resumptions_[{pool, backend}];
}
void RouterMetrics::shed() {
    std::lock_guard lock(mu_);
    ++shed_;
}
void RouterMetrics::failed(const std::string& reason) {
    std::lock_guard lock(mu_);
    ++failed_[reason];
}

void RouterMetrics::prewarm(const std::string& pool, const std::string& outcome) {
    std::lock_guard lock(mu_);
    ++prewarms_[{pool, outcome}];
}

void RouterMetrics::upstream_failure(const std::string& pool, const std::string& backend,
                                     const std::string& reason) {
    std::lock_guard lock(mu_);
    ++upstream_failures_[{pool, backend, reason}];
}

void RouterMetrics::write(metrics::TextWriter& w, const std::vector<std::string>& pools) const {
    std::lock_guard lock(mu_);
    w.family("pagoda_router_requests_total", "counter",
             "Requests answered, by pool, backend and HTTP status (resumed streams count once, "
             "on the backend that finished them)");
    for (const auto& [k, v] : requests_) {
        const auto& [pool, backend, code] = k;
        w.sample("pagoda_router_requests_total",
                 {{"pool", pool}, {"backend", backend}, {"code", std::to_string(code)}}, double(v));
    }
    w.family("pagoda_router_time_to_first_token_seconds", "histogram",
             "Time from the router receiving a request to forwarding its first token");
    for (const auto& [k, s] : series_) {
        w.histogram("pagoda_router_time_to_first_token_seconds",
                    {{"pool", k.first}, {"backend", k.second}}, s->ttft);
    }
    w.family("pagoda_router_e2e_request_latency_seconds", "histogram",
             "Time from the router receiving a request to its last byte");
    for (const auto& [k, s] : series_) {
        w.histogram("pagoda_router_e2e_request_latency_seconds",
                    {{"pool", k.first}, {"backend", k.second}}, s->e2e);
    }
    w.family("pagoda_router_inter_token_latency_seconds", "histogram",
             "Gaps between forwarded token chunks of a stream, by pool");
    for (const auto& [pool, h] : itl_) {
        w.histogram("pagoda_router_inter_token_latency_seconds", {{"pool", pool}}, *h);
    }
    w.family("pagoda_router_retries_total", "counter",
             "Requests sent again to another backend before their first byte, by pool and the "
             "backend that failed");
    per_backend(w, "pagoda_router_retries_total", retries_, pools);
    w.family("pagoda_router_resumptions_total", "counter",
             "Streams resumed on another backend after theirs failed mid-stream, by pool and the "
             "backend that failed");
    per_backend(w, "pagoda_router_resumptions_total", resumptions_, pools);
    write_outcomes(w);
}

// The router's own refusals and failures, and the pre-warms' outcomes (mu_ held).
void RouterMetrics::write_outcomes(metrics::TextWriter& w) const {
    w.family("pagoda_router_shed_requests_total", "counter",
             "Requests refused with 429 because every pool was saturated");
    w.sample("pagoda_router_shed_requests_total", {}, double(shed_));
    w.family("pagoda_router_failed_requests_total", "counter",
             "Requests the router could not serve, by reason");
    for (const char* reason : {"no_backend", "retries_exhausted", "stream_broken"}) {
        auto it = failed_.find(reason);
        w.sample("pagoda_router_failed_requests_total", {{"reason", reason}},
                 double(it == failed_.end() ? 0 : it->second));
    }
    w.family("pagoda_router_upstream_failures_total", "counter",
             "Proxied requests that failed on a backend (then retried, resumed or answered with "
             "an error), by pool, backend and reason; the request itself is counted once, in "
             "pagoda_router_requests_total, on the backend that answered it");
    for (const auto& [k, v] : upstream_failures_) {
        const auto& [pool, backend, reason] = k;
        w.sample("pagoda_router_upstream_failures_total",
                 {{"pool", pool}, {"backend", backend}, {"reason", reason}}, double(v));
    }
    w.family("pagoda_router_prewarms_total", "counter",
             "Pool pre-warms (a full warmup asked of every replica, its effect checked), by "
             "pool and outcome");
    for (const auto& [k, v] : prewarms_) {
        w.sample("pagoda_router_prewarms_total", {{"pool", k.first}, {"outcome", k.second}},
                 double(v));
    }
}

}  // namespace pagoda::router
