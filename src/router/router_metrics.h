#pragma once
// The router's /metrics: per pool (an arm of a split) and per backend, requests by status,
// errors, TTFT / inter-token / end-to-end histograms, retries, resumptions, ejections and
// the traffic weight, so each arm of a switch or canary can be judged from Prometheus.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "metrics/metrics.h"

namespace pagoda::router {

class RouterMetrics {
  public:
    void request(const std::string& pool, const std::string& backend, int code);
    void ttft(const std::string& pool, const std::string& backend, double s);
    void itl(const std::string& pool, double s);
    void e2e(const std::string& pool, const std::string& backend, double s);
    // `backend`: the one that failed (the request then went to another).
    void retry(const std::string& pool, const std::string& backend);
    void resumption(const std::string& pool, const std::string& backend);
    void shed();                             // the router's own 429
    void failed(const std::string& reason);  // a request that could not be served
    void prewarm(const std::string& pool, const std::string& outcome);  // ok | failed
    // A proxied request that failed on `backend` (then retried, resumed or answered with an
    // error): connection, http_5xx, bad_stream, incomplete_stream, overloaded (its 429).
    void upstream_failure(const std::string& pool, const std::string& backend,
                          const std::string& reason);
    // Appends every family to `w`; the retry and failure counters have a zero sample for
    // each of `pools` and each failure reason from the start, so rules and dashboards see
    // them before the first failure.
    void write(metrics::TextWriter& w, const std::vector<std::string>& pools) const;

  private:
    struct Series {
        metrics::Histogram ttft, e2e;
        Series();
    };
    Series& series(const std::string& pool, const std::string& backend);
    void write_outcomes(metrics::TextWriter& w) const;  // mu_ held
    metrics::Histogram& itl_of(const std::string& pool);

    mutable std::mutex mu_;
    std::map<std::pair<std::string, std::string>, std::unique_ptr<Series>> series_;
    std::map<std::string, std::unique_ptr<metrics::Histogram>> itl_;
    std::map<std::tuple<std::string, std::string, int>, int64_t> requests_;
    std::map<std::pair<std::string, std::string>, int64_t> retries_, resumptions_;
    std::map<std::string, int64_t> failed_;
    std::map<std::pair<std::string, std::string>, int64_t> prewarms_;  // (pool, outcome)
    std::map<std::tuple<std::string, std::string, std::string>, int64_t> upstream_failures_;
    int64_t shed_ = 0;
};

}  // namespace pagoda::router
