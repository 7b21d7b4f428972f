// Alerting: the implementation (the contract is in control/alerting/alerting.h).
#include "control/alerting/alerting.h"

#include <fmt/core.h>

#include <cmath>

#include "base/log.h"
#include "control/alerting/diag_report.h"
#include "metrics/metrics.h"

namespace pagoda::control {

using nlohmann::json;

namespace {

json value_json(const std::optional<double>& v) {
    return v && std::isfinite(*v) ? json(*v) : json();
}

int64_t knob_value(const engine::RuntimeKnobs& k, const std::string& knob) {
    return k.get(knob).value_or(0);
}

}  // namespace

Result<std::unique_ptr<Alerting>> Alerting::create(engine::Engine& engine, ConfigManager& cm,
                                                   AlertingOptions opts, AlertingWiring wiring) {
    RuleSet rules;
    if (opts.rules_file.empty()) {
        rules = default_rules();
    } else if (opts.rules_file != "none") {
        auto r = load_rules(opts.rules_file);
        if (!r.ok()) return r.error();
        rules = std::move(*r);
    } else {
        rules.source = "none";
    }
    std::unique_ptr<Alerting> a(new Alerting(engine, cm, std::move(opts), std::move(wiring)));
    std::lock_guard<std::mutex> lock(a->mu_);
    if (Status st = a->install(std::move(rules)); !st.ok()) return st.error();
    return a;
}

Alerting::~Alerting() {
    {
        std::lock_guard<std::mutex> lock(run_mu_);
        stop_ = true;
    }
    run_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    // Jobs still queued at shutdown are dropped, not lost without a word.
    const int64_t now = unix_ms_now();
    for (auto [worker, what] :
         {std::pair{&hooks_, "hooks"}, std::pair{&notify_, "notifications"}}) {
        if (const size_t n = worker->stop(); n > 0) {
            audit("alert_action",
                  {{"action", what}, {"result", "dropped"}, {"reason", "shutdown"}, {"jobs", n}},
                  now);
            log_warn("alert_actions_dropped queue={} jobs={} reason=shutdown", what, n);
        }
    }
}

Status Alerting::install(RuleSet rules) {
    rules_ = std::move(rules);
    const auto names = rules_.metric_names();
    history_.set_filter({names.begin(), names.end()});
    history_.set_keep_ms(rules_.history_ms());
    eval_.set_rules(rules_);
    log_info("alert_rules_loaded source={} rules={} interval_ms={}", rules_.source,
             rules_.rules.size(), rules_.interval_ms);
    return ok_status();
}

void Alerting::start() {
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

void Alerting::loop() {
    for (;;) {
        int64_t interval = 0;
        {
            std::lock_guard<std::mutex> lock(mu_);
            interval = rules_.interval_ms;
        }
        {
            std::unique_lock<std::mutex> lock(run_mu_);
            if (run_cv_.wait_for(lock, std::chrono::milliseconds(interval),
                                 [&] { return stop_; })) {
                return;
            }
        }
        tick(unix_ms_now());
    }
}

Status Alerting::reload() {
    if (o_.rules_file.empty() || o_.rules_file == "none") {
        return make_error(ErrorCode::kInvalidArgument,
                          "no rule file to reload: the server runs {} (start it with --rules FILE)",
                          o_.rules_file.empty() ? "the built-in default rules" : "no rules");
    }
    auto r = load_rules(o_.rules_file);
    const int64_t now = unix_ms_now();
    {
        std::lock_guard<std::mutex> lock(counts_mu_);
        ++reloads_[r.ok() ? "ok" : "refused"];
    }
    if (!r.ok()) {
        audit("rules_reload", {{"result", "refused"}, {"error", r.error().message}}, now);
        log_warn("alert_rules_refused error=\"{}\"", r.error().message);
        return r.error();
    }
    audit("rules_reload", {{"result", "ok"}, {"file", o_.rules_file}, {"rules", r->rules.size()}},
          now);
    std::lock_guard<std::mutex> lock(mu_);
    return install(std::move(*r));
}

void Alerting::tick(int64_t now_ms) {
    const std::string text = w_.metrics_text ? w_.metrics_text() : std::string();
    const auto parsed = metrics::parse_text(text);
    std::lock_guard<std::mutex> lock(mu_);
    history_.add(now_ms, parsed.samples);
    for (const Transition& t : eval_.evaluate(history_, now_ms)) {
        if (const AlertRule* r = rule_for(t.alert.rule)) on_transition(*r, t, now_ms);
    }
    knob_tick(now_ms);
    update_shedding(now_ms);
}

const AlertRule* Alerting::rule_for(const std::string& name) const {
    if (const AlertRule* r = rules_.find(name)) return r;
    auto it = external_rules_.find(name);
    return it == external_rules_.end() ? nullptr : &it->second;
}

json Alerting::alert_json(const AlertRule& rule, const AlertStatus& s,
                          const std::string& event) const {
    json labels = {{"alertname", rule.name}, {"severity", severity_name(rule.severity)}};
    for (const auto& [k, v] : rule.labels) labels[k] = v;
    return {{"rule", rule.name},
            {"event", event},
            {"state", alert_state_name(s.state)},
            {"severity", severity_name(rule.severity)},
            {"value", value_json(s.value)},
            {"expr", rule.expr_text},
            {"summary", rule.summary},
            {"description", rule.description},
            {"labels", labels},
            {"external", s.external},
            {"replica", o_.replica},
            {"firing_since_ms", s.firing_since_ms},
            {"mode", automation_name(mode())}};  // dry-run, paused: no action was taken
}

void Alerting::on_transition(const AlertRule& rule, const Transition& t, int64_t now_ms) {
    const AlertStatus& s = t.alert;
    json detail = alert_json(rule, s, transition_name(t.kind));
    detail["inhibited"] = s.inhibited;
    if (t.kind == Transition::Kind::kPending || t.kind == Transition::Kind::kCancelled) {
        audit("alert", detail, now_ms);
        return;
    }
    audit("alert", detail, now_ms);
    log_info("alert rule={} severity={} event={} value={}", rule.name, severity_name(rule.severity),
             transition_name(t.kind), detail["value"].dump());
    if (t.kind == Transition::Kind::kResolved) {
        knobs_[rule.name].episode_steps = 0;
        if (rule.has(Action::kWebhook) && !o_.webhook_url.empty()) {
            send_out(rule, s, "resolved", false, now_ms);  // humans hear of it in every mode
        }
        return;
    }
    if (s.inhibited) {
        audit("alert_action",
              {{"rule", rule.name},
               {"action", "all"},
               {"result", "inhibited"},
               {"reason", "a severe alert fires on the same target"}},
              now_ms);
        count("all", "inhibited");
        return;
    }
    dispatch(rule, s, now_ms);
}

void Alerting::dispatch(const AlertRule& rule, const AlertStatus& s, int64_t now_ms) {
    const Automation m = mode();
    if (m != Automation::kOn) {
        const std::string result = m == Automation::kDryRun ? "dry_run" : "paused";
        const bool notify = rule.has(Action::kWebhook) && !o_.webhook_url.empty();
        for (Action a : rule.actions) {
            if (a == Action::kWebhook && notify) continue;  // sent below, audited when done
            json d = {{"rule", rule.name}, {"action", action_name(a)}, {"result", result}};
            if (a == Action::kKnobStep && rule.knob) {
                const int64_t cur = knob_value(engine_.knobs(), rule.knob->knob);
                d["would"] = fmt::format("{} {} by {:.0f}%", rule.knob->knob,
                                         rule.knob->direction > 0 ? "up" : "down",
                                         rule.knob->fraction * 100);
                d["current"] = cur;
            }
            audit("alert_action", d, now_ms);
            count(action_name(a), result);
        }
        // The webhook to humans still goes out, marked with the mode (alert_json's "mode").
        if (notify) {
            send_out(rule, s, "firing", false, now_ms);
        }
        return;
    }
    const bool report = rule.has(Action::kReport);
    if (report || rule.has(Action::kWebhook)) send_out(rule, s, "firing", report, now_ms);
    if (rule.has(Action::kKnobStep) && rule.knob) {
        knobs_[rule.name].episode_steps = 0;
        knob_step(rule, now_ms);
    }
    if (rule.has(Action::kRollback)) rollback(rule, now_ms);
    run_hooks(rule, s, now_ms);
}

void Alerting::knob_step(const AlertRule& rule, int64_t now_ms) {
    const KnobStep& k = *rule.knob;
    KnobState& st = knobs_[rule.name];
    const int64_t cur = knob_value(engine_.knobs(), k.knob);
    int64_t next = std::llround(double(cur) * (1.0 + k.direction * k.fraction));
    if (next == cur) next = cur + k.direction;
    next = std::clamp(next, k.min_value, k.max_value);
    json d = {{"rule", rule.name},
              {"action", "knob_step"},
              {"knob", k.knob},
              {"from", cur},
              {"to", next},
              {"step", st.episode_steps + 1},
              {"max_steps", k.max_steps}};
    if (next == cur) {
        d["result"] = "at_bound";
        audit("alert_action", d, now_ms);
        count("knob_step", "at_bound");
        st.episode_steps = k.max_steps;  // nothing more to do in this episode
        return;
    }
    auto v = cm_.change({.patch = {{k.knob, next}},
                         .source = "alert:" + rule.name,
                         .reason = fmt::format("{} fired: {} {} 10% step", rule.name, k.knob,
                                               k.direction > 0 ? "up" : "down"),
                         .base_version = std::nullopt});
    d["result"] = v.ok() ? "ok" : "failed";
    if (v.ok()) {
        d["version"] = v->id;
        st.undo.emplace_back(k.knob, cur);
        ++st.episode_steps;
        st.last_change_ms = now_ms;
    } else {
        d["error"] = v.error().message;
    }
    audit("alert_action", d, now_ms);
    count("knob_step", d["result"].get<std::string>());
}

// Further steps while an alert keeps firing; undo steps once it has been resolved long enough.
void Alerting::knob_tick(int64_t now_ms) {
    if (mode() != Automation::kOn) return;
    for (auto& [name, st] : knobs_) {
        const AlertRule* rule = rule_for(name);
        const AlertStatus* s = eval_.find(name);
        if (!rule || !rule->knob || !s) continue;
        const KnobStep& k = *rule->knob;
        if (now_ms - st.last_change_ms < k.cooldown_ms) continue;
        if (s->state == AlertState::kFiring && !s->inhibited) {
            if (st.episode_steps > 0 && st.episode_steps < k.max_steps) knob_step(*rule, now_ms);
            continue;
        }
        if (s->state != AlertState::kInactive || st.undo.empty()) continue;
        if (now_ms - s->resolved_at_ms < k.undo_after_ms) continue;
        const auto [knob, value] = st.undo.back();
        auto v = cm_.change({.patch = {{knob, value}},
                             .source = "alert:" + name,
                             .reason = fmt::format("{} resolved: undo a {} step", name, knob),
                             .base_version = std::nullopt});
        json d = {{"rule", name},
                  {"action", "knob_undo"},
                  {"knob", knob},
                  {"to", value},
                  {"result", v.ok() ? "ok" : "failed"}};
        if (v.ok())
            d["version"] = v->id;
        else
            d["error"] = v.error().message;
        st.undo.pop_back();
        st.last_change_ms = now_ms;
        audit("alert_action", d, now_ms);
        count("knob_undo", d["result"].get<std::string>());
    }
}

void Alerting::rollback(const AlertRule& rule, int64_t now_ms) {
    json d = {{"rule", rule.name}, {"action", "rollback"}};
    auto stable = cm_.last_stable();
    if (!stable.ok() || !*stable) {
        d["result"] = "failed";
        d["error"] =
            stable.ok() ? "no stable config version to roll back to" : stable.error().message;
    } else {
        d["from"] = cm_.current().id;
        auto v = cm_.rollback((*stable)->id, fmt::format("{} fired", rule.name),
                              "alert:" + rule.name, "alert");
        d["result"] = v.ok() ? "ok" : "failed";
        if (v.ok()) {
            d["to"] = (*stable)->id;
            d["version"] = v->id;
            for (auto& [name, st] : knobs_) st.undo.clear();  // the rollback replaced the values
        } else {
            d["error"] = v.error().message;
        }
        // The effect, read back: the live settings are the stable version's.
        if (v.ok() && !(cm_.current().value == (*stable)->value)) {
            d["result"] = "failed";
            d["error"] = fmt::format("the live settings after the rollback are not version {}'s",
                                     (*stable)->id);
        }
    }
    if (d["result"] == "failed") log_warn("alert_rollback_failed detail={}", d.dump());
    audit("alert_action", d, now_ms);
    count("rollback", d["result"].get<std::string>());
}

void Alerting::update_shedding(int64_t now_ms) {
    std::string why;
    bool critical = false;
    for (const AlertStatus& s : eval_.statuses()) {
        critical |= s.state == AlertState::kFiring && s.severity != Severity::kWarning;
    }
    critical_firing_.store(critical);
    for (const AlertStatus& s : eval_.statuses()) {
        const AlertRule* r = rule_for(s.rule);
        if (r && r->has(Action::kShed) && s.state == AlertState::kFiring && !s.inhibited) {
            why = s.rule;
            break;
        }
    }
    const bool shed = !why.empty() && mode() == Automation::kOn;
    if (shed == shedding_.load()) return;
    shedding_.store(shed);
    if (w_.set_shedding) w_.set_shedding(shed);
    audit("alert_action", {{"rule", why}, {"action", shed ? "shed" : "shed_end"}, {"result", "ok"}},
          now_ms);
    count(shed ? "shed" : "shed_end", "ok");
    log_info("replica_state state={} rule={}", shed ? "shedding" : "serving", why);
}

void Alerting::send_out(const AlertRule& rule, const AlertStatus& s, const std::string& event,
                        bool report, int64_t now_ms) {
    json alert = alert_json(rule, s, event);
    json rep;
    if (report) {
        ReportInputs in;
        in.alert = alert;
        std::vector<std::string> names;
        int64_t range = 0;
        if (rule.expr) referenced(*rule.expr, names, range);  // external alerts have none
        in.metric_snapshot = json::object();
        in.series_window = json::array();
        for (const std::string& n : names) {
            const Selector sel{n, {}};
            const int64_t window = std::max<int64_t>(range, 300'000);
            for (const auto& series : history_.dump(sel, window, now_ms)) {
                in.series_window.push_back(series);
                const auto& pts = series["points"];
                if (!pts.empty())
                    in.metric_snapshot[series["series"].get<std::string>()] = pts.back()[1];
            }
        }
        const auto stats = engine_.stats();
        in.engine = stats.get();
        in.slowest_requests = w_.slowest_requests ? w_.slowest_requests(20) : json::array();
        in.config = cm_.current();
        if (auto h = cm_.history(10); h.ok()) in.recent_changes = *h;
        in.now_unix_ms = now_ms;
        rep = build_report(in);
    }
    const std::string url = o_.webhook_url;
    const bool webhook = rule.has(Action::kWebhook) && !url.empty();
    const bool queued = notify_.submit([this, rep = std::move(rep), alert, url, webhook, now_ms,
                                        name = rule.name, dir = o_.reports_dir]() {
        json payload = {{"alert", alert}};
        if (!rep.is_null()) {
            auto paths = write_report(dir, rep);
            json d = {
                {"rule", name}, {"action", "report"}, {"result", paths.ok() ? "ok" : "failed"}};
            if (paths.ok()) {
                d["json"] = paths->json_path;
                d["markdown"] = paths->markdown_path;
                payload["report"] = {{"json", paths->json_path},
                                     {"markdown", paths->markdown_path}};
            } else {
                d["error"] = paths.error().message;
            }
            audit("alert_action", d, now_ms);
            count("report", d["result"].get<std::string>());
        }
        if (!webhook) return;
        const json& a = payload["alert"];
        const std::string mode = a.value("mode", "on");
        payload["text"] =
            fmt::format("{}[{}] {} {} on {}: {} (value {})",
                        mode == "on" ? "" : fmt::format("({}: no action taken) ", mode),
                        a["severity"].get<std::string>(), a["rule"].get<std::string>(),
                        a["event"].get<std::string>(), a["replica"].get<std::string>(),
                        a["summary"].get<std::string>(), a["value"].dump());
        const HookResult r = post_json(url, payload, o_.webhook_attempts, o_.hook_timeout_ms);
        audit("alert_action",
              {{"rule", name},
               {"action", "webhook"},
               {"event", a["event"]},
               {"result", r.ok ? "ok" : "failed"},
               {"detail", r.detail}},
              unix_ms_now());
        count("webhook", r.ok ? "ok" : "failed");
    });
    if (!queued) {
        audit("alert_action",
              {{"rule", rule.name},
               {"action", report ? "report" : "webhook"},
               {"result", "dropped"},
               {"reason", "the notification queue is full"}},
              now_ms);
        count(report ? "report" : "webhook", "dropped");
        log_warn("alert_action_dropped rule={} queue=notifications reason=full", rule.name);
    }
}

void Alerting::run_hooks(const AlertRule& rule, const AlertStatus& s, int64_t now_ms) {
    struct Hook {
        Action action;
        const std::string* command;
        const char* flag;
    };
    const Hook hooks[] = {{Action::kHookCritical, &o_.hook_critical, "--hook-critical"},
                          {Action::kHookSevere, &o_.hook_severe, "--hook-severe"},
                          {Action::kHookRedeploy, &o_.hook_redeploy, "--hook-redeploy"}};
    for (const auto& [action, hook, flag] : hooks) {
        if (!rule.has(action)) continue;
        const std::string name = action_name(action);
        if (hook->empty()) {
            audit("alert_action",
                  {{"rule", rule.name},
                   {"action", name},
                   {"result", "skipped"},
                   {"reason", fmt::format("no {} was given", flag)}},
                  now_ms);
            continue;
        }
        json alert = alert_json(rule, s, "firing");
        alert["hook"] = name;
        const std::map<std::string, std::string> env = {
            {"PAGODA_ALERT_NAME", rule.name},
            {"PAGODA_ALERT_SEVERITY", severity_name(rule.severity)},
            {"PAGODA_ALERT_STATE", alert_state_name(s.state)},
            {"PAGODA_ALERT_VALUE", alert["value"].dump()},
            {"PAGODA_ALERT_SUMMARY", rule.summary},
            {"PAGODA_ALERT_HOOK", name},
            {"PAGODA_REPLICA", o_.replica}};
        const bool queued = hooks_.submit([this, cmd = *hook, alert, env, name,
                                           rule_name = rule.name] {
            const HookResult r = run_hook(cmd, alert, env, o_.hook_timeout_ms);
            audit("alert_action",
                  {{"rule", rule_name},
                   {"action", name},
                   {"result", r.ok ? "ok" : "failed"},
                   {"detail", r.detail},
                   {"seconds", r.seconds}},
                  unix_ms_now());
            count(name, r.ok ? "ok" : "failed");
            if (!r.ok)
                log_warn("hook_failed hook={} rule={} detail=\"{}\"", name, rule_name, r.detail);
        });
        if (!queued) {
            audit("alert_action",
                  {{"rule", rule.name},
                   {"action", name},
                   {"result", "dropped"},
                   {"reason", "the hook queue is full"}},
                  now_ms);
            count(name, "dropped");
            log_warn("alert_action_dropped rule={} hook={} queue=hooks reason=full", rule.name,
                     name);
        }
    }
}

void Alerting::audit(const std::string& kind, const json& detail, int64_t now_ms) {
    Status st = cm_.with_db([&](StateDb& db) { return db.record_event(kind, detail, now_ms); });
    if (!st.ok()) log_warn("audit_log_failed kind={} error=\"{}\"", kind, st.error().message);
}

void Alerting::count(const std::string& action, const std::string& result) {
    std::lock_guard<std::mutex> lock(counts_mu_);
    ++action_counts_[{action, result}];
}

}  // namespace pagoda::control
