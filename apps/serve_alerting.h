#pragma once
// `pagoda serve`'s monitoring and alerting flags (--rules, --alert-webhook, the hooks,
// --length-class-boundaries, --memory-bandwidth) and their translation into
// control::AlertingOptions. Used only by cmd_serve.cpp.

#include <string>
#include <vector>

#include "base/result.h"
#include "control/alerting/alerting.h"
#include "server/request_log.h"

namespace CLI {
class App;
}

namespace pagoda::app {

struct AlertFlags {
    std::string rules;  // "" = built-in defaults, "none" = no rules
    std::string webhook;
    std::string hook_critical, hook_severe, hook_redeploy;
    std::string hook_timeout = "10s";
    std::vector<int64_t> length_class_boundaries = {1024};
    std::string memory_bandwidth = "auto";  // GB/s, or auto (measured at start), or off
};

void add_alert_flags(CLI::App* c, AlertFlags& f);
Result<control::AlertingOptions> alerting_options(const AlertFlags& f, const std::string& state_dir,
                                                  const std::string& replica);
Result<server::LengthClasses> length_classes(const AlertFlags& f);
// Whether an alert's `instance` label ("host:port", the scrape target Prometheus names)
// is this replica, listening on `host`:`port`: the port must match, and the host be the
// listen address, a loopback name when listening on loopback or every address, this
// machine's host name, or one of its interfaces' addresses.
bool names_this_replica(const std::string& instance, const std::string& host, int port);
// Bytes/s for the bandwidth metrics: the flag's GB/s, measured ("auto", CPU backend only),
// or 0 ("off", and the simulated backend, which models its own).
Result<double> memory_bandwidth(const AlertFlags& f, bool simulated);

}  // namespace pagoda::app
