#include "apps/serve_alerting.h"

#include <arpa/inet.h>
#include <fmt/core.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "base/log.h"
#include "kernels/cpu/ops.h"

namespace pagoda::app {

namespace {

bool is_loopback_name(const std::string& h) {
    return h == "localhost" || h == "::1" || h.starts_with("127.");
}

bool is_local_address(const std::string& h) {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return false;
    bool found = false;
    for (ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
        if (a->ifa_addr == nullptr) continue;
        char buf[INET6_ADDRSTRLEN] = {};
        const int fam = a->ifa_addr->sa_family;
        if (fam == AF_INET) {
            inet_ntop(fam, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
        } else if (fam == AF_INET6) {
            inet_ntop(fam, &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, buf,
                      sizeof buf);
        }
        found = buf[0] != '\0' && h == buf;
    }
    freeifaddrs(list);
    return found;
}

}  // namespace

bool names_this_replica(const std::string& instance, const std::string& host, int port) {
    const size_t colon = instance.rfind(':');
    if (colon == std::string::npos || instance.substr(colon + 1) != std::to_string(port)) {
        return false;
    }
    std::string h = instance.substr(0, colon);
    if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
    if (h == host) return true;
    const bool everywhere = host == "0.0.0.0" || host == "::" || host.empty();
    if (is_loopback_name(h)) return everywhere || is_loopback_name(host);
    if (!everywhere) return false;
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) == 0 && h == name) return true;
    return is_local_address(h);
}

void add_alert_flags(CLI::App* c, AlertFlags& f) {
    const char* g = "Monitoring and alerts";
    c->add_option("--rules", f.rules,
                  "Alert rules (TOML; docs/operations.md). Default: the built-in rules; 'none' "
                  "turns alerting off. Reloaded on SIGHUP or POST /admin/rules/reload")
        ->group(g);
    c->add_option("--alert-webhook", f.webhook,
                  "POST every firing and resolved alert here as JSON (with a Slack-compatible "
                  "'text' field), with the diagnostic report's paths")
        ->group(g);
    c->add_option("--hook-critical", f.hook_critical,
                  "Run on a critical alert: a shell command (the alert as JSON on stdin and "
                  "PAGODA_ALERT_* variables) or an http:// URL to POST it to")
        ->group(g);
    c->add_option("--hook-severe", f.hook_severe,
                  "Run on a severe alert: the disaster-recovery hook (e.g. switch DNS to a DR "
                  "cluster); command or URL as --hook-critical")
        ->group(g);
    c->add_option("--hook-redeploy", f.hook_redeploy,
                  "Run on a severe alert after --hook-severe: e.g. trigger a CI/CD pipeline")
        ->group(g);
    c->add_option("--hook-timeout", f.hook_timeout,
                  "Longest a hook or webhook call may take (then it is killed; recorded)")
        ->capture_default_str()
        ->group(g);
    c->add_option("--length-class-boundaries", f.length_class_boundaries,
                  "Context length (prompt + output tokens) where the length classes of the "
                  "latency metrics split: one value gives short|long, two give "
                  "short|medium|long")
        ->capture_default_str()
        ->expected(1, 2)
        ->group(g);
    c->add_option("--memory-bandwidth", f.memory_bandwidth,
                  "Peak memory bandwidth for the bandwidth metrics and alert: GB/s, 'auto' "
                  "(measured at start, about 0.2 s) or 'off'")
        ->capture_default_str()
        ->group(g);
}

Result<control::AlertingOptions> alerting_options(const AlertFlags& f, const std::string& state_dir,
                                                  const std::string& replica) {
    control::AlertingOptions o;
    o.rules_file = f.rules;
    o.webhook_url = f.webhook;
    if (!f.webhook.empty() && f.webhook.rfind("http://", 0) != 0) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--alert-webhook: '{}' is not an http:// URL", f.webhook);
    }
    o.hook_critical = f.hook_critical;
    o.hook_severe = f.hook_severe;
    o.hook_redeploy = f.hook_redeploy;
    // A URL hook must be one the hook runner can call: refused now, not when the alert fires.
    for (const auto& [flag, hook] : {std::pair{"--hook-critical", &f.hook_critical},
                                     std::pair{"--hook-severe", &f.hook_severe},
                                     std::pair{"--hook-redeploy", &f.hook_redeploy}}) {
        if (hook->rfind("https://", 0) == 0) {
            return make_error(ErrorCode::kInvalidArgument,
                              "{}: '{}': https is not supported; give an http:// URL (a local "
                              "relay such as a sidecar proxy for TLS) or a shell command, e.g. "
                              "curl -sf -d @- https://...",
                              flag, *hook);
        }
    }
    auto t = control::parse_duration_ms(f.hook_timeout);
    if (!t.ok()) return Error{t.error().code, "--hook-timeout: " + t.error().message};
    if (*t < 100 || *t > 600'000) {
        return make_error(ErrorCode::kInvalidArgument, "--hook-timeout must be in [100ms, 10m]");
    }
    o.hook_timeout_ms = *t;
    o.reports_dir = state_dir + "/reports";
    o.replica = replica;
    return o;
}

Result<server::LengthClasses> length_classes(const AlertFlags& f) {
    const auto& b = f.length_class_boundaries;
    if (b.empty() || b.size() > 2 || b.front() < 1 || (b.size() == 2 && b[1] <= b[0])) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--length-class-boundaries: one or two increasing token counts >= 1, "
                          "e.g. 1024 or 512 4096");
    }
    return server::LengthClasses{b};
}

Result<double> memory_bandwidth(const AlertFlags& f, bool simulated) {
    if (f.memory_bandwidth == "off" || simulated) return 0.0;
    if (f.memory_bandwidth == "auto") {
        const double bw = kernels::cpu::measure_read_bandwidth();
        log_info("memory_bandwidth measured_gbps={:.1f}", bw / 1e9);
        return bw;
    }
    char* end = nullptr;
    const double gbps = std::strtod(f.memory_bandwidth.c_str(), &end);
    if (end == f.memory_bandwidth.c_str() || *end != '\0' || !(gbps > 0) || gbps > 1e5) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--memory-bandwidth: '{}' is not GB/s (a number > 0), auto or off",
                          f.memory_bandwidth);
    }
    return gbps * 1e9;
}

}  // namespace pagoda::app
