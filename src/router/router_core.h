#pragma once
// Internal to src/router: the state shared by the HTTP front, the proxied calls and the
// health checker.

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http/server.h"
#include "router/backend.h"
#include "router/balancer.h"
#include "router/router.h"
#include "router/router_metrics.h"

namespace pagoda::router {

struct Pool {
    PoolConfig cfg;
    std::vector<std::shared_ptr<Backend>> backends;
    std::string source_sig;  // backends_file contents or resolved addresses, last seen
};

class Core : public std::enable_shared_from_this<Core> {
  public:
    Core(RouterConfig c, RouterHooks h);
    const RouterConfig cfg;
    const RouterHooks hooks;
    RouterMetrics metrics;

    double now_s() const;
    void audit(const std::string& kind, const nlohmann::json& detail) const;

    struct Picked {
        std::shared_ptr<Backend> backend;
        std::string reason;
        bool saturated = false;
    };
    Picked pick(const RouteKey& key, const std::vector<const Backend*>& exclude) const;
    bool any_ready() const;

    // Pool membership (discovery) and weights.
    std::vector<std::shared_ptr<Backend>> backends_of(const std::string& pool) const;
    std::vector<std::shared_ptr<Backend>> all_backends() const;
    void set_members(const std::string& pool, const std::vector<std::string>& urls,
                     const std::string& sig);
    std::string source_sig(const std::string& pool) const;
    std::vector<PoolConfig> pool_configs() const;
    Status set_weights(const std::map<std::string, double>& w, const std::string& reason);
    std::map<std::string, double> weights() const;
    void set_dr(bool on, const std::string& reason);
    bool dr_forced() const;

    void record_arm(const std::string& pool, const ArmSample& s);
    std::vector<ArmSample> arm_samples(const std::string& pool, double since_s) const;
    nlohmann::json pools_json() const;
    std::string metrics_text() const;

    // The hold queue (RouterConfig::hold_timeout_s): `retry(expired)` runs on the health
    // thread when a backend is ready (false) or the deadline passed (true). False when the
    // queue is full.
    bool hold(std::function<void(bool expired)> retry, double deadline_s);
    void release_held();
    void drop_retired();  // health thread: frees the retired backends no call holds
    int64_t held() const;
    // Router clock of the last request that found no healthy backend (held or refused); -1.
    std::atomic<double> last_unserved_s{-1};

    // Added by the app once, before traffic; read on the I/O thread.
    std::map<std::string, Router::AdminRoute> admin_routes;
    std::vector<std::function<std::string()>> metrics_sources;
    std::mutex extras_mu;  // admin_routes, metrics_sources
    std::atomic<bool> stopping{false};
    std::thread health_thread;
    std::unique_ptr<http::Server> server;

  private:
    std::shared_ptr<Backend> make_backend(const std::string& pool, const std::string& url) const;
    const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
    mutable std::mutex mu_;
    std::vector<Pool> pools_;
    std::map<std::string, double> weights_;
    bool dr_forced_ = false;
    std::map<std::string, std::deque<ArmSample>> arms_;
    // Backends that left a pool, kept until no call holds them: the last reference must not
    // drop on the backend's own I/O thread (its client's destructor joins that thread).
    std::vector<std::shared_ptr<Backend>> retired_;
    mutable std::mutex held_mu_;
    std::deque<std::pair<double, std::function<void(bool)>>> held_;
};

// The health checker: every health_interval_s, re-reads backend sources (file, DNS) and
// checks every backend's /ready and /metrics. Runs until core.stopping.
void health_loop(const std::shared_ptr<Core>& core);
void check_all(Core& core);

// One proxied request: chooses a backend, forwards, retries, resumes, answers.
struct CallInput {
    std::string method, path;
    std::string raw_body;
    nlohmann::json body;  // parsed for generation requests
    bool generation = false, chat = false, stream = false;
    bool client_usage = false, client_token_ids = false;
    int n = 1;
    int64_t max_tokens = -1;
    RouteKey key;
    std::string content_type;
    std::string request_id;  // X-Request-Id, to the backend and back
};
void start_proxy(std::shared_ptr<Core> core, CallInput in, std::shared_ptr<http::Responder> resp);

}  // namespace pagoda::router
