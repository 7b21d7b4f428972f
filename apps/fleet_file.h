#pragma once
// The fleet file of `pagoda fleet`: named `pagoda serve` profiles, the router with pools
// that name a profile and a replica count, and schedules. On one machine `fleet up` runs
// the replicas as child processes on base_port, base_port + 1, ...; `fleet render` turns
// the same file into Kubernetes manifests.
//
//   [fleet]                  name, base_port, host, state_dir, image, drain_timeout_s
//   [profiles.NAME]          pagoda serve flags by long name: block-size = 16, backend = "sim"
//   [router] / [[router.pools]] as in a router file, plus profile, replicas, start
//   [schedule]               time_zone, entries = ["19:30 prewarm night", ...]

#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "router/router_config.h"

namespace pagoda::app {

struct Profile {
    std::string name;
    std::vector<std::string> args;  // `pagoda serve` flags, as on a command line
};

struct FleetFile {
    std::string path;
    std::string name = "pagoda";
    std::string host = "127.0.0.1";
    int base_port = 8100;
    std::string state_dir;  // "" = the default state directory
    std::string image;      // default: pagoda:<this build's version>
    double drain_timeout_s = 30;
    // Where a rendered KEDA ScaledObject reads the replicas' metrics (pools with min_replicas 0).
    std::string prometheus_url = "http://prometheus-operated.monitoring.svc:9090";
    std::map<std::string, Profile> profiles;
    router::RouterConfig router;  // pools' backends are the replicas' URLs
};

// Reads and checks the whole file: unknown keys, profiles whose flags `pagoda serve` would
// refuse, pools naming a missing profile, weights, schedules. Errors say FILE:LINE:KEY.
Result<FleetFile> load_fleet_file(const std::string& path);

// Checks `pagoda serve` flags without running anything (the serve command's own parser).
Status check_serve_args(const std::vector<std::string>& args);

// YAML manifests for Kubernetes (fleet_render*.cpp): per pool a StatefulSet (a state volume per
// replica), a headless Service, a PodDisruptionBudget and its autoscaler; keys in a Secret; a
// ServiceMonitor; the router's ConfigMap, Deployment and Service.
std::string render_kubernetes(const FleetFile& f, const std::string& ns);

}  // namespace pagoda::app
