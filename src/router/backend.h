#pragma once
// One backend of a pool: its HTTP client, the requests this router has outstanding on it,
// what the active health check last saw (/ready, and from /metrics the waiting queue, the KV
// use and whether it is a Pagoda replica), and passive ejection: after
// `eject_after_failures` consecutive failures (connect errors, timeouts, 5xx, broken
// streams) it gets no traffic for eject_base_s x 2^(ejections - 1), capped at eject_max_s;
// a success resets the count.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "http/client.h"
#include "router/balancer.h"
#include "router/router_config.h"

namespace pagoda::router {

// Passive ejection as a pure state machine over a clock in seconds.
struct Ejection {
    int failures = 0;    // consecutive
    int ejections = 0;   // since the last success
    double until_s = 0;  // ejected while now < until_s
    int64_t total = 0;   // ejections ever (metric)

    bool ejected(double now_s) const { return now_s < until_s; }
    // True when this failure ejects the backend.
    bool on_failure(double now_s, int after, double base_s, double max_s);
    void on_success();
};

struct HealthState {
    bool checked = false;   // at least one check finished
    bool up = false;        // answered the check
    bool ready = false;     // /ready said 200
    bool shedding = false;  // /ready said 503 shedding
    bool pagoda = false;    // /metrics has pagoda_ series: resume with token ids
    double waiting = 0, kv_usage = 0;
    std::string detail;  // why not ready, for /admin/pools
};

class Backend {
  public:
    Backend(std::string pool, std::string url, std::unique_ptr<http::Client> client,
            std::unique_ptr<http::Client> health_client);
    const std::string& pool() const { return pool_; }
    const std::string& url() const { return url_; }
    uint64_t id_hash() const { return id_hash_; }
    http::Client& client() { return *client_; }
    http::Client& health_client() { return *health_; }

    std::atomic<int64_t> outstanding{0};

    HealthState health() const;
    void set_health(HealthState h);
    // Passive signals from proxied requests; true when the failure ejected it.
    bool on_failure(double now_s, const RouterConfig& c);
    void on_success();
    bool ejected(double now_s) const;
    int64_t ejections_total() const;
    Candidate candidate(double now_s, const RouterConfig& c) const;

  private:
    const std::string pool_, url_;
    const uint64_t id_hash_;
    std::unique_ptr<http::Client> client_, health_;
    mutable std::mutex mu_;
    HealthState health_state_;
    Ejection ejection_;
};

}  // namespace pagoda::router
