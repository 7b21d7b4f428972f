#pragma once
// AlertEvaluator: the state of every rule, pending -> firing -> resolved, from the rules'
// expressions over SeriesHistory. A rule becomes pending when its expression first holds,
// fires once it has held for `for`, and resolves only after it has not held for
// `keep_firing_for` (hysteresis: a flapping signal does not fire and resolve again and
// again). A firing severe alert inhibits critical and warning alerts of the same target:
// they keep their state but their actions are held back. Alerts from an external
// Prometheus (Alertmanager's webhook) enter through set_external(). Not thread-safe: the
// control tick owns it.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "control/alerting/alert_rules.h"

namespace pagoda::control {

enum class AlertState { kInactive, kPending, kFiring };
const char* alert_state_name(AlertState s);

struct AlertStatus {
    std::string rule;
    Severity severity = Severity::kWarning;
    std::string target = "replica";
    AlertState state = AlertState::kInactive;
    std::optional<double> value;  // of the last evaluation
    int64_t pending_since_ms = 0, firing_since_ms = 0, last_true_ms = 0, resolved_at_ms = 0;
    bool inhibited = false;
    bool external = false;  // set by Alertmanager's webhook
};

struct Transition {
    enum class Kind { kPending, kFiring, kResolved, kCancelled };
    Kind kind = Kind::kPending;
    AlertStatus alert;  // after the transition
};
const char* transition_name(Transition::Kind k);

class AlertEvaluator {
  public:
    // Keeps the state of rules that keep their name.
    void set_rules(const RuleSet& rules);
    std::vector<Transition> evaluate(const SeriesHistory& h, int64_t now_ms);
    // An external alert (by rule name): firing or resolved now. Returns the transition, if
    // the state changed.
    std::optional<Transition> set_external(const AlertRule& rule, bool firing, int64_t now_ms);
    std::vector<AlertStatus> statuses() const;
    const AlertStatus* find(const std::string& rule) const;

  private:
    void step(const AlertRule& r, AlertStatus& s, bool holds, int64_t now_ms,
              std::vector<Transition>& out) const;
    // Marks inhibited alerts; an alert that stops being inhibited while firing fires again
    // (its actions were held back).
    void inhibit(std::vector<Transition>& out);

    RuleSet rules_;
    std::map<std::string, AlertStatus> state_;
};

}  // namespace pagoda::control
