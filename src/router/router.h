#pragma once
// `pagoda router`: an OpenAI-compatible HTTP front for pools of backends (Pagoda, vLLM or
// llama.cpp servers). Requests are balanced by load, prefix affinity and session; retried
// on another backend before the first byte; streams whose backend dies are resumed on
// another one (from token ids where the backend is Pagoda, from text otherwise) so the
// client sees one stream with correct usage. Pools have roles (primary, standby, dr) and
// primary pools share traffic by weight, which rollouts and canaries move.

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "router/router_config.h"

namespace pagoda::router {

// Every automatic action (ejections, weight changes, breaker decisions) is handed to
// `audit` (the app records it in the state db's audit log). Called from any thread.
struct RouterHooks {
    std::function<void(const std::string& kind, const nlohmann::json& detail)> audit;
    // GET /admin/events?kind=K&limit=N: the audit log, newest first (null: 404).
    std::function<Result<std::vector<nlohmann::json>>(const std::string& kind, int limit)> events;
};

// One finished request of a pool, for the breaker and the canary judge.
struct ArmSample {
    double t_s = 0;                 // router clock when it finished
    double ttft_s = -1, e2e_s = 0;  // ttft -1 when no token came
    bool long_prompt = false;
    bool ok = true;
};

class Core;

class Router {
  public:
    ~Router();
    // Checks the backends once, then listens.
    static Result<std::unique_ptr<Router>> start(const RouterConfig& cfg, RouterHooks hooks = {});
    int port() const;
    void stop();

    // Shares of the primary pools in percent (must add up to 100; unknown or non-primary
    // pools are an error). Audited with `reason`.
    Status set_weights(const std::map<std::string, double>& w, const std::string& reason);
    std::map<std::string, double> weights() const;
    // The severe hook: every request to the DR pools while on.
    void set_dr(bool forced, const std::string& reason);
    nlohmann::json pools_json() const;
    // A sized pool's backends, as the fleet runs them: a backend left out takes no new
    // request (its streams in flight finish). Audited when it changes.
    void set_pool_members(const std::string& pool, const std::vector<std::string>& urls);
    // Requests in the hold queue (RouterConfig::hold_timeout_s).
    int64_t held() const;
    // now_s() of the last request that found no healthy backend (held or refused); -1: none.
    double last_unserved_s() const;
    std::vector<ArmSample> arm_samples(const std::string& pool, double since_s) const;
    double now_s() const;  // seconds since start (the clock of ArmSample)
    // Extra admin routes (rollouts, schedules): path -> handler(method, body) -> (status, json).
    using AdminRoute = std::function<std::pair<int, nlohmann::json>(const std::string& method,
                                                                    const nlohmann::json& body)>;
    void add_admin_route(const std::string& path, AdminRoute route);
    // The pre-warm of `pool`: asks every backend for a full warmup (POST /admin/warmup
    // {"level": "full"}) and checks its effect: polls GET /admin/warmup until each reports
    // level full, or its full warmup failed, or `timeout_s` passed. Blocks; returns {pool,
    // replicas, accepted, warmed, outcome (ok | failed), failures: [{backend, reason}],
    // seconds}, audited as `pool_prewarmed`, counted in pagoda_router_prewarms_total{pool,
    // outcome} and logged as a warning when it failed.
    nlohmann::json prewarm_pool(const std::string& pool, double timeout_s = 120);
    const RouterConfig& config() const;
    // Records an automatic action in the audit log (RouterHooks::audit) and the log.
    void audit(const std::string& kind, const nlohmann::json& detail) const;
    // Extra text appended to /metrics (rollout state), called on each scrape.
    void add_metrics_source(std::function<std::string()> source);

  private:
    Router() = default;
    std::shared_ptr<Core> core_;
};

}  // namespace pagoda::router
