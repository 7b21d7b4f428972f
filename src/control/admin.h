#pragma once
// ControlService: the control plane as a running service. Owns control::ControlPlane (live
// configuration, block-size policy, OOM guard, warm levels, forecast) and control::Alerting
// (rules, tiered actions), ticks the plane once a second on a thread of its own, and serves
// the admin route families (server/admin_api.h) from them. Used by `pagoda serve`.

#include <memory>

#include "control/alerting/alerting.h"
#include "control/control_plane.h"
#include "server/admin_api.h"

namespace pagoda::control {

class ControlService {
  public:
    virtual ~ControlService() = default;
    // Starts the once-a-second tick (statistics, guard, stable marks, decisions) and the
    // alert rules' evaluation: after warmup, whose requests are not traffic.
    virtual void start_ticking() = 0;
    // Stops both threads; call before what the alerting wiring reads (the server) goes.
    virtual void stop() = 0;
    // The warmup before ready: how long, which mode (minimal, full, off) and how many of its
    // API requests answered (GET /admin/warmup "startup", read by pagoda check).
    virtual void note_startup_warmup(double seconds, const std::string& mode, int requests_ok,
                                     int requests) = 0;
    // The route families for ServerConfig::admin (alerts null without alerting); each
    // holds this service.
    virtual server::AdminRoutes routes() = 0;
};

// The threads stop on destruction. `alerting` may be null (no alert routes).
std::shared_ptr<ControlService> start_control_service(std::unique_ptr<ControlPlane> plane,
                                                      std::unique_ptr<Alerting> alerting);

}  // namespace pagoda::control
