#pragma once
// Alerting: a replica watching itself. Every rule interval it reads the replica's own
// /metrics text (never the engine thread: the text comes from published snapshots), adds it
// to the series history, evaluates the rules and acts on what fired or resolved, by tier:
// - warning: a diagnostic report (diag_report.h) and the alert webhook; a knob step
//   (max_num_seqs or max_num_batched_tokens ±10%, within bounds, with a cooldown and at
//   most N steps), each a new config version, undone step by step once the alert has been
//   resolved for `undo_after`;
// - critical: rollback to the last stable config version, "shedding" (/ready 503) until
//   it resolves, the critical hook;
// - severe: the disaster-recovery and redeploy hooks.
// Every firing, resolution and action goes to the audit log first; hooks run on one worker
// thread and reports and webhooks on another, each bounded in time and queue, so nothing
// blocks serving and a slow webhook never delays a hook. The automation mode decides: on
// acts, dry-run records what it would do, paused records and skips; the webhook to humans
// goes out in every mode, marked with it. Alertmanager's webhook (version 4) feeds the same
// actions. Thread-safe.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "control/alerting/alert_actions.h"
#include "control/alerting/alert_evaluator.h"
#include "control/config/config_manager.h"
#include "control/control_plane.h"

namespace pagoda::control {

struct AlertingOptions {
    std::string rules_file;   // --rules; "" = the built-in defaults, "none" = no rules
    std::string webhook_url;  // --alert-webhook
    std::string hook_critical, hook_severe, hook_redeploy;  // commands or http:// URLs
    int64_t hook_timeout_ms = 10'000;                       // --hook-timeout
    int webhook_attempts = 3;
    std::string reports_dir;  // <state-dir>/reports
    std::string replica;      // who this is, in payloads (host:port)
};

// What Alerting needs from the rest of the process (apps/ wires it).
struct AlertingWiring {
    std::function<std::string()> metrics_text;            // the replica's /metrics
    std::function<nlohmann::json(int)> slowest_requests;  // GET /admin/requests/slowest
    std::function<void(bool)> set_shedding;               // /ready and pagoda_replica_state
    std::function<Automation()> automation;               // on | dry-run | paused
    // Whether an alert's `instance` label ("host:port", as Prometheus names the scrape
    // target) names this replica; null: every instance does.
    std::function<bool(const std::string&)> is_instance;
};

class Alerting {
  public:
    static Result<std::unique_ptr<Alerting>> create(engine::Engine& engine, ConfigManager& cm,
                                                    AlertingOptions opts, AlertingWiring wiring);
    ~Alerting();  // stops the evaluation thread and the worker

    void start();  // evaluates every rule interval on a thread of its own
    void tick(int64_t now_ms);
    // Reads the rule file again; on error the running rules stay and the error says why.
    Status reload();
    nlohmann::json status() const;      // GET /admin/alerts
    nlohmann::json rules_json() const;  // GET /admin/rules
    // POST /admin/alerts/webhook: Alertmanager's payload (version 4). A payload with an
    // alert whose `instance` label names another replica is refused whole (kConflict, 409)
    // and audited (`alert_refused`): acting on it would roll back and shed the wrong one.
    Result<nlohmann::json> alertmanager(const nlohmann::json& payload, int64_t now_ms);
    std::string metrics_text(const std::string& model_name) const;
    bool shedding() const { return shedding_.load(); }
    // A critical or severe alert fires. Lock-free: the control plane's tick asks it while
    // holding its own lock, and Alerting asks the control plane for the mode under ours.
    bool critical_firing() const { return critical_firing_.load(); }
    void wait_idle() {  // tests: hooks, reports and webhooks done
        hooks_.wait_idle();
        notify_.wait_idle();
    }

  private:
    Status check_instances(const nlohmann::json& alerts, int64_t now_ms);
    const AlertRule* external_rule(const nlohmann::json& alert,
                                   const std::string& name);  // mu_ held
    Alerting(engine::Engine& e, ConfigManager& cm, AlertingOptions o, AlertingWiring w)
        : engine_(e), cm_(cm), o_(std::move(o)), w_(std::move(w)) {}
    Status install(RuleSet rules);  // mu_ held
    void on_transition(const AlertRule& rule, const Transition& t, int64_t now_ms);
    void dispatch(const AlertRule& rule, const AlertStatus& s, int64_t now_ms);
    void knob_step(const AlertRule& rule, int64_t now_ms);
    void knob_tick(int64_t now_ms);
    void rollback(const AlertRule& rule, int64_t now_ms);
    void update_shedding(int64_t now_ms);
    // Queues the report and the webhook POST (in that order: the POST names the report).
    void send_out(const AlertRule& rule, const AlertStatus& s, const std::string& event,
                  bool report, int64_t now_ms);
    void run_hooks(const AlertRule& rule, const AlertStatus& s, int64_t now_ms);
    nlohmann::json alert_json(const AlertRule& rule, const AlertStatus& s,
                              const std::string& event) const;
    void audit(const std::string& kind, const nlohmann::json& detail, int64_t now_ms);
    void count(const std::string& action, const std::string& result);
    Automation mode() const { return w_.automation ? w_.automation() : Automation::kOn; }
    const AlertRule* rule_for(const std::string& name) const;  // mu_ held
    void loop();

    engine::Engine& engine_;
    ConfigManager& cm_;
    AlertingOptions o_;
    AlertingWiring w_;
    mutable std::mutex mu_;
    // Guarded by mu_:
    RuleSet rules_;
    std::map<std::string, AlertRule> external_rules_;  // Alertmanager alerts without a rule
    SeriesHistory history_;
    AlertEvaluator eval_;
    struct KnobState {
        std::vector<std::pair<std::string, int64_t>> undo;  // (knob, value before), a stack
        int episode_steps = 0;                              // steps since it last started firing
        int64_t last_change_ms = 0;
    };
    std::map<std::string, KnobState> knobs_;
    mutable std::mutex counts_mu_;                                          // the worker counts too
    std::map<std::pair<std::string, std::string>, int64_t> action_counts_;  // guarded by counts_mu_
    std::map<std::string, int64_t> reloads_;  // by result; guarded by counts_mu_
    std::atomic<bool> shedding_{false};
    std::atomic<bool> critical_firing_{false};  // set with shedding_ (update_shedding)
    // The evaluation thread.
    std::mutex run_mu_;
    std::condition_variable run_cv_;
    bool stop_ = false;  // guarded by run_mu_
    std::thread thread_;
    // Last: destroyed first, before what their jobs use. Hooks (disaster recovery, redeploy)
    // and notifications (reports, the webhook with its retries) on queues of their own, so a
    // slow webhook never holds a hook back; a full queue or shutdown drops jobs, audited.
    ActionWorker hooks_, notify_;
};

}  // namespace pagoda::control
