#pragma once
// Pool sizing for `pagoda fleet up` (issue 37): for each pool with max_replicas, a
// control::PoolSizer ticks once a second on the router's signals (the pool's finished
// requests of the last minute: rate and p99 TTFT; the backends' waiting queues and the
// router's hold queue) and the supervisor applies its decisions drain-safe: a replica
// leaves routing first, then drains (Supervisor::set_pool_size, retire). Every applied
// decision is audited (`pool_sized`, with its reason and inputs) and its effect checked
// (`pool_sized_checked`, ok or failed); --dry-run audits without applying; a manual scale (`pagoda
// fleet scale`, POST /admin/fleet/scale) pauses the pool's automatic sizing until `--auto`.

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/fleet_file.h"
#include "apps/fleet_supervisor.h"
#include "control/sizing/pool_sizer.h"
#include "router/router.h"

namespace pagoda::app {

class FleetScaler {
  public:
    FleetScaler(const FleetFile& f, Supervisor& sup, router::Router& r, bool dry_run);
    // Puts the router's members of each sized pool in line with the supervisor's.
    void start();
    void tick();  // main thread, about once a second
    nlohmann::json status() const;
    // POST /admin/fleet/scale {"pool", "replicas"} | {"pool", "auto": true}.
    std::pair<int, nlohmann::json> admin(const std::string& method, const nlohmann::json& body);

  private:
    struct PoolState {
        std::string name;
        control::PoolSizer sizer;
        bool paused = false;  // manual scale
        double started_s = 0;
        double last_request_s = 0;  // the newest finished request seen (idle time)
        nlohmann::json last;        // the last decision
        // The last applied change, until its effect is checked: `to` replicas routed and
        // ready (up) or routed (down) within max(5 s, 3 x cold_start_s).
        int check_to = -1, check_from = 0;
        double check_since = 0;
    };
    void check_effect(PoolState& p, double now);
    control::PoolSignals signals(PoolState& p, double now) const;
    void resize(PoolState& p, int n, const std::string& reason, const nlohmann::json& inputs);

    Supervisor& sup_;
    router::Router& r_;
    const bool dry_run_;
    mutable std::mutex mu_;
    std::map<std::string, PoolState> pools_;
};

}  // namespace pagoda::app
