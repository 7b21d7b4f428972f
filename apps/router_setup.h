#pragma once
// Router wiring shared by `pagoda router` and `pagoda fleet up`: the audit hook into the
// state db, and the traffic controller (rollouts, canaries, schedules) with its clock.

#include <memory>
#include <string>

#include "base/result.h"
#include "router/rollout.h"
#include "router/router.h"

namespace pagoda::app {

struct ClockFlags {
    double clock_scale = 1;
    std::string clock_start;  // HH:MM in the schedule's zone; "" = now
    bool dry_run = false;
};

// Every automatic action of the router, recorded in the state db's audit log.
Result<router::RouterHooks> audit_hooks(const std::string& state_dir);
Result<std::unique_ptr<router::TrafficController>> traffic_controller(
    const ClockFlags& f, const router::RouterConfig& cfg, router::Router& r,
    router::ControllerOptions extra = {});

}  // namespace pagoda::app
