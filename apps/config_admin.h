#pragma once
// Wires control::ConfigManager (live, versioned configuration) to the server's ConfigAdmin
// interface, and runs the stable-window timer. Used by `pagoda serve`.

#include <memory>

#include "control/config_manager.h"
#include "server/config_admin.h"

namespace pagoda::app {

// Owns the manager and a thread that calls tick() every few seconds; stops on destruction.
std::shared_ptr<server::ConfigAdmin> make_config_admin(
    std::unique_ptr<control::ConfigManager> manager);

}  // namespace pagoda::app
