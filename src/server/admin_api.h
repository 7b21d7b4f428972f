#pragma once
// What the admin routes need of the control plane, one interface per route family, so that
// each family answers for itself: a server without alerting answers /admin/alerts with
// "alerting is not enabled", not the config routes' words. control/admin.cpp implements
// them; server/ never includes control/. Implementations are thread-safe.

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace pagoda::server {

struct AdminReply {
    int status = 200;
    nlohmann::json body;  // the answer, or OpenAI's error shape on failure
};

// /admin/config, /admin/config/history, /admin/config/rollback; PUT /admin/knobs is an
// alias of a partial PUT /admin/config.
class ConfigRoutes {
  public:
    virtual ~ConfigRoutes() = default;
    virtual AdminReply get() = 0;               // current version and value
    virtual AdminReply history(int limit) = 0;  // newest first
    // A partial value; `base_version` (If-Match) makes a concurrent change a 409.
    virtual AdminReply put(const nlohmann::json& patch, std::optional<int64_t> base_version,
                           const std::string& reason) = 0;
    // To `to`, or to the last stable version.
    virtual AdminReply rollback(std::optional<int64_t> to, const std::string& reason) = 0;
};

// The automatic actions and their record: /admin/block-size(/decide), /admin/oom-guard,
// /admin/automation, /admin/control(/pause|/resume), /admin/events and /admin/audit.
class ControlRoutes {
  public:
    virtual ~ControlRoutes() = default;
    // The policy and its last decision with its numbers; `decide_now`: a decision first.
    virtual AdminReply block_size(bool decide_now) = 0;
    virtual AdminReply oom_guard() = 0;  // signals and thresholds
    // GET, or PUT {"mode": "on"|"dry-run"|"paused", "reason": ...}.
    virtual AdminReply automation(const std::optional<nlohmann::json>& put) = 0;
    // "status", "pause" (a person takes over) or "resume".
    virtual AdminReply control(const std::string& verb) = 0;
    virtual AdminReply events(const std::string& kind, int limit) = 0;  // the audit log
};

// /admin/alerts, /admin/rules(/reload), /admin/alerts/webhook (Alertmanager, version 4).
class AlertRoutes {
  public:
    virtual ~AlertRoutes() = default;
    virtual AdminReply alerts() = 0;  // every rule's state
    // The rules; `reload`: re-read the file first (a bad file is refused, the rules stay).
    virtual AdminReply rules(bool reload) = 0;
    virtual AdminReply alert_webhook(const nlohmann::json& payload) = 0;
};

// /admin/warmup (GET, or POST {"level": ..., "duration": "60s"}) and /admin/forecast.
class WarmRoutes {
  public:
    virtual ~WarmRoutes() = default;
    virtual AdminReply warmup(const std::optional<nlohmann::json>& post) = 0;
    virtual AdminReply forecast() = 0;
};

// The families a server has; a null one answers 404 naming what is not enabled.
struct AdminRoutes {
    std::shared_ptr<ConfigRoutes> config;  // null: /admin/knobs only, unversioned
    std::shared_ptr<ControlRoutes> control;
    std::shared_ptr<AlertRoutes> alerts;
    std::shared_ptr<WarmRoutes> warm;
    // The control plane's own series for /metrics (after the server's).
    std::function<std::string(const std::string& model_name)> metrics_text;
};

}  // namespace pagoda::server
