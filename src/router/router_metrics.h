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
#include <utility>

#include "metrics/metrics.h"

namespace pagoda::router {

class RouterMetrics {
  public:
    void request(const std::string& pool, const std::string& backend, int code);
    void ttft(const std::string& pool, const std::string& backend, double s);
    void itl(const std::string& pool, double s);
    void e2e(const std::string& pool, const std::string& backend, double s);
    void retry(const std::string& pool);
    void resumption(const std::string& pool);
    void shed();                             // the router's own 429
    void failed(const std::string& reason);  // a request that could not be served
    // Appends every family to `w`.
    void write(metrics::TextWriter& w) const;

  private:
    struct Series {
        metrics::Histogram ttft, e2e;
        Series();
    };
    Series& series(const std::string& pool, const std::string& backend);
    metrics::Histogram& itl_of(const std::string& pool);

    mutable std::mutex mu_;
    std::map<std::pair<std::string, std::string>, std::unique_ptr<Series>> series_;
    std::map<std::string, std::unique_ptr<metrics::Histogram>> itl_;
    std::map<std::tuple<std::string, std::string, int>, int64_t> requests_;
    std::map<std::string, int64_t> retries_, resumptions_, failed_;
    int64_t shed_ = 0;
};

}  // namespace pagoda::router
