#pragma once
// ConfigAdmin: what the admin routes need of the control plane (control/), as an
// interface so that server/ and control/ (both level 5) do not include each other; apps/
// wires control::ControlPlane to it. Implementations are thread-safe.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace pagoda::server {

struct AdminReply {
    int status = 200;
    nlohmann::json body;  // the answer, or OpenAI's error shape on failure
};

class ConfigAdmin {
  public:
    virtual ~ConfigAdmin() = default;
    virtual AdminReply get() = 0;               // current version and value
    virtual AdminReply history(int limit) = 0;  // newest first
    // A partial value; `base_version` (If-Match) makes a concurrent change a 409.
    virtual AdminReply put(const nlohmann::json& patch, std::optional<int64_t> base_version,
                           const std::string& reason) = 0;
    // To `to`, or to the last stable version.
    virtual AdminReply rollback(std::optional<int64_t> to, const std::string& reason) = 0;
    // GET /admin/block-size: the policy and its last decision with its numbers; with
    // `decide_now` (POST /admin/block-size/decide) a decision runs first.
    virtual AdminReply block_size(bool decide_now) = 0;
    virtual AdminReply oom_guard() = 0;  // GET /admin/oom-guard: signals and thresholds
    // GET /admin/automation, or PUT {"mode": "on"|"dry-run"|"paused", "reason": ...}.
    virtual AdminReply automation(const std::optional<nlohmann::json>& put) = 0;
    // GET /admin/events?kind=K&limit=N: the audit log, newest first.
    virtual AdminReply events(const std::string& kind, int limit) = 0;
    virtual std::string metrics_text(const std::string& model_name) = 0;

    // Alerting (issue 14). GET /admin/alerts: every rule's state.
    virtual AdminReply alerts() { return off(); }
    // GET /admin/rules, or POST /admin/rules/reload (`reload`): a bad file is refused and
    // the running rules stay.
    virtual AdminReply rules(bool reload) { return off(); }
    // POST /admin/alerts/webhook: Alertmanager's webhook payload (version 4).
    virtual AdminReply alert_webhook(const nlohmann::json& payload) { return off(); }
    // POST /admin/control/pause | /admin/control/resume, GET /admin/control.
    virtual AdminReply control(const std::string& verb) { return off(); }
    // GET /admin/warmup, or POST {"level": "off|low|medium|high", "duration": "60s"}.
    virtual AdminReply warmup(const std::optional<nlohmann::json>& post) { return off(); }
    // GET /admin/forecast: the rate forecast, each model's backtest error, the choice.
    virtual AdminReply forecast() { return off(); }

  private:
    static AdminReply off() {
        return {404,
                {{"error",
                  {{"message", "alerting is not enabled on this server"},
                   {"type", "not_found_error"},
                   {"param", nullptr},
                   {"code", 404}}}}};
    }
};

}  // namespace pagoda::server
