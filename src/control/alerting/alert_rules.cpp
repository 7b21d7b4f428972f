// Alert rule files (TOML) to AlertRule values, with file:line errors; the default rules.
#include "control/alerting/alert_rules.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "base/check.h"
#include "base/toml_reader.h"
#include "control/default_rules_toml.h"  // generated from default_rules.toml
#include "settings/settings.h"

namespace pagoda::control {

namespace {

constexpr Action kAllActions[] = {Action::kReport,     Action::kWebhook,     Action::kKnobStep,
                                  Action::kRollback,   Action::kShed,        Action::kHookCritical,
                                  Action::kHookSevere, Action::kHookRedeploy};

// Errors carry file:line:key: reason; the first one wins.
using Reader = TomlReader;

std::optional<KnobStep> read_knob(Reader& r, const toml::table& t, const std::string& p) {
    KnobStep k;
    r.only(t, p,
           {"knob", "direction", "step", "max_steps", "cooldown", "undo_after", "min", "max"});
    if (auto s = r.str(t, p, "knob")) {
        if (const settings::Spec* spec = settings::find(*s); !spec || !settings::is_knob(*spec)) {
            r.fail(t.get("knob"), p + "knob",
                   fmt::format("must be a step knob ({})", settings::names(settings::is_knob)));
        } else {  // the knob's own range bounds the steps unless min/max say tighter
            k.min_value = std::max<int64_t>(spec->min, 1);
            k.max_value = spec->max;
        }
        k.knob = *s;
    }
    if (auto s = r.str(t, p, "direction")) {
        if (*s != "up" && *s != "down")
            r.fail(t.get("direction"), p + "direction", "must be up or down");
        k.direction = *s == "up" ? 1 : -1;
    }
    if (auto v = r.number(t, p, "step", 0.01, 0.5)) k.fraction = *v;
    if (auto v = r.number(t, p, "max_steps", 1, 20)) k.max_steps = int(*v);
    if (auto v = r.duration(t, p, "cooldown")) k.cooldown_ms = *v;
    if (auto v = r.duration(t, p, "undo_after")) k.undo_after_ms = *v;
    if (auto v = r.number(t, p, "min", 1, 1 << 24)) k.min_value = int64_t(*v);
    if (auto v = r.number(t, p, "max", 1, 1 << 24)) k.max_value = int64_t(*v);
    if (k.min_value > k.max_value) r.fail(&t, p + "min", "min is above max");
    return k;
}

void read_actions(Reader& r, const toml::node& n, const std::string& key, AlertRule& rule) {
    const toml::array* arr = n.as_array();
    if (!arr) return r.fail(&n, key, "expected a list of action names");
    for (const toml::node& a : *arr) {
        auto s = a.as_string();
        auto act = s ? parse_action(s->get()) : std::nullopt;
        if (!act) {
            return r.fail(&a, key,
                          "unknown action (allowed: report, webhook, knob_step, rollback, shed, "
                          "hook_critical, hook_severe, hook_redeploy)");
        }
        rule.actions.push_back(*act);
    }
}

void read_rule(Reader& r, const toml::table& t, size_t index, RuleSet& set) {
    AlertRule rule;
    rule.line = int(t.source().begin.line);
    const std::string p = fmt::format("rule[{}].", index);
    r.only(t, p,
           {"name", "expr", "for", "keep_firing_for", "severity", "labels", "summary",
            "description", "actions", "knob_step"});
    auto name = r.str(t, p, "name");
    if (!name || name->empty()) return r.fail(&t, p + "name", "every rule needs a name");
    rule.name = *name;
    if (set.find(rule.name)) return r.fail(t.get("name"), p + "name", "a second rule of this name");
    auto expr = r.str(t, p, "expr");
    if (!expr) return r.fail(&t, p + "expr", "every rule needs an expression");
    auto parsed = parse_expr(*expr);
    if (!parsed) return r.fail(t.get("expr"), p + "expr", parsed.error().message);
    rule.expr_text = *expr;
    rule.expr = *parsed;
    if (auto d = r.duration(t, p, "for")) rule.for_ms = *d;
    if (auto d = r.duration(t, p, "keep_firing_for")) rule.keep_firing_for_ms = *d;
    if (auto s = r.str(t, p, "severity")) {
        if (*s == "warning")
            rule.severity = Severity::kWarning;
        else if (*s == "critical")
            rule.severity = Severity::kCritical;
        else if (*s == "severe")
            rule.severity = Severity::kSevere;
        else
            r.fail(t.get("severity"), p + "severity", "must be warning, critical or severe");
    }
    rule.summary = r.str(t, p, "summary").value_or(rule.name);
    rule.description = r.str(t, p, "description").value_or("");
    if (const toml::node* l = t.get("labels")) {
        const toml::table* lt = l->as_table();
        if (!lt) return r.fail(l, p + "labels", "expected a table of strings");
        for (const auto& [k, v] : *lt) {
            auto s = v.as_string();
            if (!s) return r.fail(&v, p + "labels." + std::string(k.str()), "expected a string");
            if (k.str() == "severity" || k.str() == "alertname") {
                return r.fail(&v, p + "labels." + std::string(k.str()),
                              "is set by the rule itself");
            }
            rule.labels[std::string(k.str())] = s->get();
        }
    }
    if (const toml::node* a = t.get("actions"))
        read_actions(r, *a, p + "actions", rule);
    else
        rule.actions = default_actions(rule.severity);
    if (const toml::node* k = t.get("knob_step")) {
        if (!k->as_table()) return r.fail(k, p + "knob_step", "expected a table");
        rule.knob = read_knob(r, *k->as_table(), p + "knob_step.");
        if (!rule.has(Action::kKnobStep)) rule.actions.push_back(Action::kKnobStep);
    } else if (rule.has(Action::kKnobStep)) {
        return r.fail(&t, p + "knob_step", "action knob_step needs a [rule.knob_step] table");
    }
    if (!r.failed()) set.rules.push_back(std::move(rule));
}

}  // namespace

const char* severity_name(Severity s) {
    switch (s) {
        case Severity::kWarning: return "warning";
        case Severity::kCritical: return "critical";
        case Severity::kSevere: return "severe";
    }
    return "warning";
}

const char* action_name(Action a) {
    switch (a) {
        case Action::kReport: return "report";
        case Action::kWebhook: return "webhook";
        case Action::kKnobStep: return "knob_step";
        case Action::kRollback: return "rollback";
        case Action::kShed: return "shed";
        case Action::kHookCritical: return "hook_critical";
        case Action::kHookSevere: return "hook_severe";
        case Action::kHookRedeploy: return "hook_redeploy";
    }
    return "report";
}

std::optional<Action> parse_action(std::string_view s) {
    for (Action a : kAllActions) {
        if (s == action_name(a)) return a;
    }
    return std::nullopt;
}

std::vector<Action> default_actions(Severity s) {
    switch (s) {
        case Severity::kWarning: return {Action::kReport, Action::kWebhook};
        case Severity::kCritical:
            return {Action::kReport, Action::kWebhook, Action::kRollback, Action::kShed,
                    Action::kHookCritical};
        case Severity::kSevere:
            return {Action::kReport, Action::kWebhook, Action::kHookSevere, Action::kHookRedeploy};
    }
    return {};
}

std::string AlertRule::target() const {
    auto it = labels.find("target");
    return it == labels.end() ? "replica" : it->second;
}

bool AlertRule::has(Action a) const {
    return std::find(actions.begin(), actions.end(), a) != actions.end();
}

const AlertRule* RuleSet::find(std::string_view name) const {
    for (const AlertRule& r : rules) {
        if (r.name == name) return &r;
    }
    return nullptr;
}

int64_t RuleSet::history_ms() const {
    int64_t ms = 60'000;
    for (const AlertRule& r : rules) {
        std::vector<std::string> names;
        int64_t range = 0;
        referenced(*r.expr, names, range);
        ms = std::max(ms, range + 2 * interval_ms);
    }
    return ms;
}

std::vector<std::string> RuleSet::metric_names() const {
    std::vector<std::string> names;
    int64_t range = 0;
    for (const AlertRule& r : rules) referenced(*r.expr, names, range);
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
}

Result<RuleSet> parse_rules(std::string_view text, const std::string& source_name) {
    PAGODA_ASSIGN_OR_RETURN(toml::table root, parse_toml(text, source_name));
    Reader r(source_name);
    RuleSet set;
    set.source = source_name;
    r.only(root, "", {"settings", "rule"});
    if (const toml::node* s = root.get("settings")) {
        if (const toml::table* st = s->as_table()) {
            r.only(*st, "settings.", {"interval"});
            if (auto d = r.duration(*st, "settings.", "interval")) {
                if (*d < 100 || *d > 600'000) {
                    r.fail(st->get("interval"), "settings.interval", "must be in [100ms, 10m]");
                }
                set.interval_ms = *d;
            }
        } else {
            r.fail(s, "settings", "expected a table");
        }
    }
    if (const toml::node* rules = root.get("rule")) {
        const toml::array* arr = rules->as_array();
        if (!arr)
            return make_error(ErrorCode::kInvalidFile, "{}:{}:rule: expected [[rule]] tables",
                              source_name, rules->source().begin.line);
        for (size_t i = 0; i < arr->size() && !r.failed(); ++i) {
            const toml::table* t = (*arr)[i].as_table();
            if (!t)
                r.fail(&(*arr)[i], fmt::format("rule[{}]", i), "expected a table");
            else
                read_rule(r, *t, i, set);
        }
    }
    if (r.failed()) return r.error();
    return set;
}

Result<RuleSet> load_rules(const std::string& path) {
    std::ifstream f(path);
    if (!f) {
        return make_error(ErrorCode::kNotFound, "cannot read the rule file {}: {}", path,
                          std::strerror(errno));
    }
    std::stringstream ss;
    ss << f.rdbuf();
    return parse_rules(ss.str(), path);
}

RuleSet default_rules() {
    auto r = parse_rules(default_rules_toml(), "built-in defaults");
    PAGODA_CHECK(r.ok()) << r.error().message;
    return *r;
}

}  // namespace pagoda::control

namespace pagoda::control {
std::string_view default_rules_toml() { return kDefaultRulesToml; }
}  // namespace pagoda::control
