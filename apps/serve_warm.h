#pragma once
// `pagoda serve`'s warmup flags (--warmup, the dynamic tier's thresholds, windows and
// spins, the predictive tier's forecast clock, lead and rise) and their translation into
// control::ControlOptions. Used only by cmd_serve.cpp.

#include <string>

#include "base/result.h"
#include "control/control_plane.h"

namespace CLI {
class App;
}

namespace pagoda::app {

struct WarmFlags {
    std::string warmup = "minimal";  // minimal | full | off (before ready)
    bool dynamic = true;             // the queue-depth tier
    std::string thresholds = "5,10,20";
    double seconds_per_request = 0.5;
    std::string max_window = "300s";
    std::string spin_ms = "0,100,1000,-1";
    std::string pass_ms = "0,0,0,100";
    // The predictive tier.
    bool forecast = true;
    double clock_scale = 1;
    std::string clock_start;  // unix seconds or 2026-11-30T06:00:00Z; "": now
    int lead_minutes = 15;
    double rise = 1.5;
    double capacity_rps = 0;
    std::string refit = "60m";
};

void add_warm_flags(CLI::App* c, WarmFlags& f);
Status apply_warm_flags(const WarmFlags& f, control::ControlOptions& o);

}  // namespace pagoda::app
