#pragma once
// Wires control::ControlPlane (live configuration, block-size policy, OOM guard) and
// control::Alerting (rules, tiered actions) to the server's ConfigAdmin interface, and ticks
// the plane once a second. Used by `pagoda serve`.

#include <memory>

#include "control/alerting/alerting.h"
#include "control/control_plane.h"
#include "server/config_admin.h"

namespace pagoda::app {

class ControlAdmin : public server::ConfigAdmin {
  public:
    // Starts the once-a-second tick (statistics, guard, stable marks, decisions): after
    // warmup, whose requests are not traffic.
    // (and the alert rules' evaluation).
    virtual void start_ticking() = 0;
    // Stops both threads; call before what the alerting wiring reads (the server) goes.
    virtual void stop() = 0;
    virtual void note_startup_warmup(double seconds) = 0;
};

// Owns the control plane and the alerting (null: none); the threads stop on destruction.
std::shared_ptr<ControlAdmin> make_config_admin(std::unique_ptr<control::ControlPlane> plane,
                                                std::unique_ptr<control::Alerting> alerting);

}  // namespace pagoda::app
