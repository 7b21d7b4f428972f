#pragma once
// Alert rules: what to watch (an expression over the replica's metrics, rule_expr.h), how
// long it must hold (`for`), how long it keeps firing after it stops holding
// (`keep_firing_for`, the hysteresis that stops flapping), its severity and what it does
// (actions). Read from TOML (`--rules FILE`); a bad file is refused whole with
// file:line:key: reason. The default set ships compiled in. Thread-safe (plain values).
//
//   [[rule]]
//   name = "TTFTHigh"
//   expr = "quantile(0.99, ttft_seconds[5m]) > 0.5"
//   for = "5m"
//   severity = "warning"            # warning | critical | severe
//   summary = "TTFT p99 above 500 ms"
//   actions = ["report", "webhook", "knob_step"]   # default: by severity
//   [rule.knob_step]
//   knob = "max_num_seqs"           # or max_num_batched_tokens
//   direction = "down"              # or up

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "control/alerting/rule_expr.h"

namespace pagoda::control {

enum class Severity { kWarning, kCritical, kSevere };
const char* severity_name(Severity s);

enum class Action {
    kReport,        // diagnostic report (JSON + Markdown) in the state directory
    kWebhook,       // POST the alert and report to --alert-webhook
    kKnobStep,      // a small knob step (warning tier), undone after resolution
    kRollback,      // to the last stable config version
    kShed,          // /ready 503 "shedding" until resolved
    kHookCritical,  // --hook-critical
    kHookSevere,    // --hook-severe (disaster recovery)
    kHookRedeploy,  // --hook-redeploy
};
const char* action_name(Action a);
std::optional<Action> parse_action(std::string_view s);
std::vector<Action> default_actions(Severity s);

struct KnobStep {
    std::string knob = "max_num_seqs";  // or max_num_batched_tokens
    int direction = -1;                 // -1 down, +1 up
    double fraction = 0.1;              // of the value before the step
    int max_steps = 3;
    int64_t cooldown_ms = 60'000;     // between steps, and between undo steps
    int64_t undo_after_ms = 300'000;  // resolved this long: undo one step at a time
    int64_t min_value = 1;
    int64_t max_value = 1 << 20;
};

struct AlertRule {
    std::string name;
    std::string expr_text;
    ExprPtr expr;
    int64_t for_ms = 0;
    int64_t keep_firing_for_ms = 60'000;
    Severity severity = Severity::kWarning;
    std::map<std::string, std::string> labels;  // `target` groups inhibition (default replica)
    std::string summary, description;
    std::vector<Action> actions;
    std::optional<KnobStep> knob;
    int line = 0;  // in its file

    std::string target() const;
    bool has(Action a) const;
};

struct RuleSet {
    std::vector<AlertRule> rules;
    int64_t interval_ms = 5'000;  // [settings] interval: how often the rules are evaluated
    std::string source;           // file name, or "built-in defaults"

    const AlertRule* find(std::string_view name) const;
    // The longest window or `for` + `keep_firing_for` any rule needs, for SeriesHistory.
    int64_t history_ms() const;
    std::vector<std::string> metric_names() const;
};

Result<RuleSet> parse_rules(std::string_view toml_text, const std::string& source_name);
Result<RuleSet> load_rules(const std::string& path);
std::string_view default_rules_toml();
RuleSet default_rules();  // parsed; CHECKed at first use

}  // namespace pagoda::control
