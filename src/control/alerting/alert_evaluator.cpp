// AlertEvaluator: the implementation (the contract is in control/alerting/alert_evaluator.h).
#include "control/alerting/alert_evaluator.h"

namespace pagoda::control {

const char* alert_state_name(AlertState s) {
    switch (s) {
        case AlertState::kInactive: return "inactive";
        case AlertState::kPending: return "pending";
        case AlertState::kFiring: return "firing";
    }
    return "inactive";
}

const char* transition_name(Transition::Kind k) {
    switch (k) {
        case Transition::Kind::kPending: return "pending";
        case Transition::Kind::kFiring: return "firing";
        case Transition::Kind::kResolved: return "resolved";
        case Transition::Kind::kCancelled: return "cancelled";
    }
    return "pending";
}

void AlertEvaluator::set_rules(const RuleSet& rules) {
    rules_ = rules;
    std::map<std::string, AlertStatus> next;
    for (const AlertRule& r : rules_.rules) {
        AlertStatus s;
        auto it = state_.find(r.name);
        if (it != state_.end()) s = it->second;
        s.rule = r.name;
        s.severity = r.severity;
        s.target = r.target();
        next[r.name] = s;
    }
    state_ = std::move(next);
}

void AlertEvaluator::step(const AlertRule& r, AlertStatus& s, bool holds, int64_t now_ms,
                          std::vector<Transition>& out) const {
    using K = Transition::Kind;
    if (holds) {
        s.last_true_ms = now_ms;
        if (s.state == AlertState::kInactive) {
            s.state = AlertState::kPending;
            s.pending_since_ms = now_ms;
            out.push_back({K::kPending, s});
        }
        if (s.state == AlertState::kPending && now_ms - s.pending_since_ms >= r.for_ms) {
            s.state = AlertState::kFiring;
            s.firing_since_ms = now_ms;
            out.push_back({K::kFiring, s});
        }
        return;
    }
    if (s.state == AlertState::kPending) {
        s.state = AlertState::kInactive;
        out.push_back({K::kCancelled, s});
    } else if (s.state == AlertState::kFiring && now_ms - s.last_true_ms >= r.keep_firing_for_ms) {
        s.state = AlertState::kInactive;
        s.resolved_at_ms = now_ms;
        out.push_back({K::kResolved, s});
        s.inhibited = false;
    }
}

std::vector<Transition> AlertEvaluator::evaluate(const SeriesHistory& h, int64_t now_ms) {
    std::vector<Transition> out;
    for (const AlertRule& r : rules_.rules) {
        AlertStatus& s = state_[r.name];
        if (s.external) continue;  // Alertmanager decides these
        s.value = control::evaluate(*r.expr, h, now_ms);
        step(r, s, s.value.has_value(), now_ms, out);
    }
    inhibit(out);
    return out;
}

void AlertEvaluator::inhibit(std::vector<Transition>& out) {
    std::map<std::string, bool> severe_firing;  // by target
    for (const auto& [name, s] : state_) {
        if (s.state == AlertState::kFiring && s.severity == Severity::kSevere) {
            severe_firing[s.target] = true;
        }
    }
    for (auto& [name, s] : state_) {
        const bool now_inhibited = s.severity != Severity::kSevere &&
                                   s.state == AlertState::kFiring &&
                                   severe_firing.count(s.target) > 0;
        if (s.inhibited && !now_inhibited && s.state == AlertState::kFiring) {
            s.inhibited = false;
            out.push_back({Transition::Kind::kFiring, s});  // its actions were held back
        }
        s.inhibited = now_inhibited;
    }
    for (Transition& t : out) {
        if (t.kind == Transition::Kind::kFiring) t.alert.inhibited = state_[t.alert.rule].inhibited;
    }
}

std::optional<Transition> AlertEvaluator::set_external(const AlertRule& rule, bool firing,
                                                       int64_t now_ms) {
    AlertStatus& s = state_[rule.name];
    s.rule = rule.name;
    s.severity = rule.severity;
    s.target = rule.target();
    std::vector<Transition> out;
    if (firing) {
        s.external = true;
        if (s.state == AlertState::kFiring) return std::nullopt;
        s.state = AlertState::kFiring;
        s.pending_since_ms = s.firing_since_ms = s.last_true_ms = now_ms;
        out.push_back({Transition::Kind::kFiring, s});
    } else {
        if (s.state != AlertState::kFiring) {
            s.external = false;
            return std::nullopt;
        }
        s.state = AlertState::kInactive;
        s.resolved_at_ms = now_ms;
        s.external = false;
        out.push_back({Transition::Kind::kResolved, s});
    }
    inhibit(out);
    return out.front();
}

std::vector<AlertStatus> AlertEvaluator::statuses() const {
    std::vector<AlertStatus> out;
    for (const auto& [name, s] : state_) out.push_back(s);
    return out;
}

const AlertStatus* AlertEvaluator::find(const std::string& rule) const {
    auto it = state_.find(rule);
    return it == state_.end() ? nullptr : &it->second;
}

}  // namespace pagoda::control
