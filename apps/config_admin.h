#pragma once
// Wires control::ControlPlane (live configuration, block-size policy, OOM guard) to the
// server's ConfigAdmin interface, and ticks it once a second. Used by `pagoda serve`.

#include <memory>

#include "control/control_plane.h"
#include "server/config_admin.h"

namespace pagoda::app {

class ControlAdmin : public server::ConfigAdmin {
  public:
    // Starts the once-a-second tick (statistics, guard, stable marks, decisions): after
    // warmup, whose requests are not traffic.
    virtual void start_ticking() = 0;
};

// Owns the control plane; the tick thread stops on destruction.
std::shared_ptr<ControlAdmin> make_config_admin(std::unique_ptr<control::ControlPlane> plane);

}  // namespace pagoda::app
