// Alerting's read side and its external intake: GET /admin/alerts and /admin/rules, the
// /metrics families, and Alertmanager's webhook payload (version 4).
#include <fmt/core.h>

#include "base/log.h"
#include "control/alerting/alerting.h"
#include "metrics/metrics.h"

namespace pagoda::control {

using nlohmann::json;

json Alerting::status() const {
    std::lock_guard<std::mutex> lock(mu_);
    json alerts = json::array();
    for (const AlertStatus& s : eval_.statuses()) {
        json a = {{"rule", s.rule},
                  {"severity", severity_name(s.severity)},
                  {"state", alert_state_name(s.state)},
                  {"target", s.target},
                  {"inhibited", s.inhibited},
                  {"external", s.external}};
        a["value"] = s.value && std::isfinite(*s.value) ? json(*s.value) : json();
        if (s.pending_since_ms) a["active_since_ms"] = s.pending_since_ms;
        if (s.firing_since_ms) a["firing_since_ms"] = s.firing_since_ms;
        if (s.resolved_at_ms) a["resolved_at_ms"] = s.resolved_at_ms;
        auto k = knobs_.find(s.rule);
        if (k != knobs_.end() && !k->second.undo.empty()) {
            json undo = json::array();
            for (const auto& [knob, value] : k->second.undo) undo.push_back({{knob, value}});
            a["knob_steps_to_undo"] = undo;
        }
        alerts.push_back(a);
    }
    return {{"alerts", alerts},
            {"shedding", shedding_.load()},
            {"automation", automation_name(mode())},
            {"rules_source", rules_.source},
            {"interval_ms", rules_.interval_ms},
            {"history_snapshots", history_.size()},
            // Which escalation hooks are set (not their commands: they may hold secrets).
            {"hooks",
             {{"critical", !o_.hook_critical.empty()},
              {"severe", !o_.hook_severe.empty()},
              {"redeploy", !o_.hook_redeploy.empty()},
              {"webhook", !o_.webhook_url.empty()}}}};
}

json Alerting::rules_json() const {
    std::lock_guard<std::mutex> lock(mu_);
    json rules = json::array();
    for (const AlertRule& r : rules_.rules) {
        json actions = json::array();
        for (Action a : r.actions) actions.push_back(action_name(a));
        json j = {{"name", r.name},
                  {"expr", r.expr_text},
                  {"promql", to_promql(*r.expr)},
                  {"for", format_duration(r.for_ms)},
                  {"keep_firing_for", format_duration(r.keep_firing_for_ms)},
                  {"severity", severity_name(r.severity)},
                  {"labels", r.labels},
                  {"summary", r.summary},
                  {"actions", actions}};
        if (r.knob) {
            j["knob_step"] = {{"knob", r.knob->knob},
                              {"direction", r.knob->direction > 0 ? "up" : "down"},
                              {"step", r.knob->fraction},
                              {"max_steps", r.knob->max_steps},
                              {"cooldown", format_duration(r.knob->cooldown_ms)},
                              {"undo_after", format_duration(r.knob->undo_after_ms)}};
        }
        rules.push_back(j);
    }
    return {{"source", rules_.source},
            {"interval", format_duration(rules_.interval_ms)},
            {"metrics", rules_.metric_names()},
            {"rules", rules}};
}

// Every alert that names an instance must name this replica (the router dispatches them);
// a stray one refuses the whole payload, audited.
Status Alerting::check_instances(const json& alerts, int64_t now_ms) {
    for (const json& a : alerts) {
        const json& labels = a["labels"];
        const auto inst = labels.find("instance");
        if (inst == labels.end() || !w_.is_instance) continue;
        const std::string instance = inst->is_string() ? inst->get<std::string>() : inst->dump();
        if (w_.is_instance(instance)) continue;
        const json d = {{"alertname", labels.value("alertname", "")},
                        {"instance", instance},
                        {"replica", o_.replica},
                        {"reason", "the alert names another replica"}};
        audit("alert_refused", d, now_ms);
        count("webhook_in", "refused");
        log_warn("alert_refused detail={}", d.dump());
        return make_error(ErrorCode::kConflict,
                          "alert {} names instance '{}', not this replica ({}): send it to that "
                          "replica, or to the router's POST /admin/alerts/webhook, which "
                          "dispatches each alert to the replica it names",
                          labels.value("alertname", ""), instance, o_.replica);
    }
    return ok_status();
}

// The rule of an alert Alertmanager sends that no local rule names: its severity label
// picks the actions; null without one.
const AlertRule* Alerting::external_rule(const json& a, const std::string& name) {
    const std::string sev = a["labels"].value("severity", "");
    AlertRule r;
    r.name = name;
    r.expr_text = "(external)";
    if (sev == "warning") {
        r.severity = Severity::kWarning;
    } else if (sev == "critical") {
        r.severity = Severity::kCritical;
    } else if (sev == "severe") {
        r.severity = Severity::kSevere;
    } else {
        return nullptr;
    }
    r.actions = default_actions(r.severity);
    r.summary = a.contains("annotations") && a["annotations"].is_object()
                    ? a["annotations"].value("summary", name)
                    : name;
    r.labels["target"] = a["labels"].value("target", "replica");
    return &(external_rules_[name] = r);
}

Result<json> Alerting::alertmanager(const json& payload, int64_t now_ms) {
    const auto bad = [](const std::string& why) {
        return make_error(ErrorCode::kInvalidArgument,
                          "not an Alertmanager webhook payload: {} (expected version \"4\" and an "
                          "'alerts' list, each with 'status' and labels.alertname)",
                          why);
    };
    if (!payload.is_object()) return bad("the body is not a JSON object");
    if (payload.value("version", "") != "4") return bad("'version' is not \"4\"");
    const auto it = payload.find("alerts");
    if (it == payload.end() || !it->is_array()) return bad("no 'alerts' list");
    for (const json& a : *it) {
        if (!a.is_object() || !a.contains("labels") || !a["labels"].is_object()) {
            return bad("an alert without labels");
        }
    }
    if (Status st = check_instances(*it, now_ms); !st.ok()) return st.error();
    json results = json::array();
    std::lock_guard<std::mutex> lock(mu_);
    for (const json& a : *it) {
        if (!a.is_object() || !a.contains("labels") || !a["labels"].is_object()) {
            return bad("an alert without labels");
        }
        const std::string name = a["labels"].value("alertname", "");
        const std::string status = a.value("status", "");
        if (name.empty() || (status != "firing" && status != "resolved")) {
            return bad(
                "an alert without labels.alertname or with a status other than "
                "firing/resolved");
        }
        const AlertRule* rule = rule_for(name);
        if (!rule) rule = external_rule(a, name);
        if (!rule) {
            results.push_back({{"alertname", name},
                               {"result", "ignored"},
                               {"reason",
                                "no rule of this name and no severity label "
                                "(warning, critical or severe)"}});
            continue;
        }
        auto t = eval_.set_external(*rule, status == "firing", now_ms);
        if (t) on_transition(*rule, *t, now_ms);
        results.push_back({{"alertname", name},
                           {"status", status},
                           {"result", t ? transition_name(t->kind) : "unchanged"}});
    }
    update_shedding(now_ms);
    return json{{"accepted", results.size()}, {"alerts", results}};
}

std::string Alerting::metrics_text(const std::string& model_name) const {
    metrics::TextWriter w;
    w.family("pagoda_alerts", "gauge",
             "1 for each pending or firing alert (like Prometheus's ALERTS series).");
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (const AlertStatus& s : eval_.statuses()) {
            if (s.state == AlertState::kInactive) continue;
            w.sample("pagoda_alerts",
                     {{"model_name", model_name},
                      {"alertname", s.rule},
                      {"severity", severity_name(s.severity)},
                      {"alertstate", alert_state_name(s.state)}},
                     1.0);
        }
    }
    std::lock_guard<std::mutex> lock(counts_mu_);
    w.family("pagoda_alert_actions_total", "counter",
             "Alert actions by action and result (ok, failed, dry_run, paused, inhibited, "
             "dropped, skipped, at_bound).");
    for (const auto& [key, n] : action_counts_) {
        w.sample("pagoda_alert_actions_total",
                 {{"model_name", model_name}, {"action", key.first}, {"result", key.second}},
                 double(n));
    }
    w.family("pagoda_alert_rule_reloads_total", "counter", "Rule file reloads by result.");
    for (const char* r : {"ok", "refused"}) {
        auto it = reloads_.find(r);
        w.sample("pagoda_alert_rule_reloads_total", {{"model_name", model_name}, {"result", r}},
                 it == reloads_.end() ? 0.0 : double(it->second));
    }
    return w.text();
}

}  // namespace pagoda::control
