// `pagoda rules export|check|show|reload` and `pagoda audit`: the alert rules as files
// (the Prometheus rule file of the same rules, a check of a TOML rule file) and over a
// running server's admin API (its rules and alert states, a reload, the audit log).
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>

#include "apps/cli_common.h"
#include "apps/commands.h"
#include "control/alerting/alert_rules.h"

namespace pagoda::app {
namespace {

struct RulesFlags {
    std::string rules;  // "" = the built-in defaults
    std::string format = "prometheus";
    std::string output;  // "" = stdout
    std::string file;    // check
    AdminTarget target;
    std::string kind;
    int limit = 50;
};

// A YAML single-quoted scalar.
std::string yq(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
}

std::string prometheus_rules(const control::RuleSet& set) {
    std::string y = fmt::format(
        "# Pagoda's alert rules for Prometheus, from {} (`pagoda rules export --format "
        "prometheus`).\n# The same rules `pagoda serve` evaluates in process; point an "
        "Alertmanager webhook at\n# POST /admin/alerts/webhook to run the same actions "
        "(docs/operations.md).\ngroups:\n  - name: pagoda\n    rules:\n",
        set.source);
    for (const control::AlertRule& r : set.rules) {
        std::string actions;
        for (control::Action a : r.actions)
            actions += (actions.empty() ? "" : ",") + std::string(control::action_name(a));
        y += fmt::format("      - alert: {}\n        expr: {}\n", r.name,
                         yq(control::to_promql(*r.expr)));
        if (r.for_ms > 0) y += fmt::format("        for: {}\n", control::format_duration(r.for_ms));
        if (r.keep_firing_for_ms > 0) {
            y += fmt::format("        keep_firing_for: {}\n",
                             control::format_duration(r.keep_firing_for_ms));
        }
        y += fmt::format("        labels:\n          severity: {}\n",
                         control::severity_name(r.severity));
        for (const auto& [k, v] : r.labels) y += fmt::format("          {}: {}\n", k, yq(v));
        y += fmt::format("        annotations:\n          summary: {}\n", yq(r.summary));
        if (!r.description.empty())
            y += fmt::format("          description: {}\n", yq(r.description));
        y += fmt::format("          pagoda_expr: {}\n          pagoda_actions: {}\n",
                         yq(r.expr_text), yq(actions));
    }
    return y;
}

Result<control::RuleSet> load(const std::string& file) {
    if (file.empty()) return control::default_rules();
    return control::load_rules(file);
}

int run_export(const RulesFlags& f) {
    auto set = load(f.rules);
    if (!set.ok()) {
        fail(set.error());
        return 2;
    }
    std::string text;
    if (f.format == "prometheus") {
        text = prometheus_rules(*set);
    } else {  // toml: the built-in defaults, to start a file of one's own
        if (!f.rules.empty()) {
            std::fprintf(stderr, "error: --format toml writes the built-in rules; drop --rules\n");
            return 2;
        }
        text = std::string(control::default_rules_toml());
    }
    if (f.output.empty()) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        return 0;
    }
    std::ofstream out(f.output);
    out << text;
    if (!out) return fail(make_error(ErrorCode::kIo, "cannot write {}", f.output));
    std::fprintf(stderr, "wrote %zu rules to %s\n", set->rules.size(), f.output.c_str());
    return 0;
}

int run_check(const RulesFlags& f) {
    auto set = control::load_rules(f.file);
    if (!set.ok()) {
        fail(set.error());
        return 2;
    }
    std::printf("%s: %zu rules, evaluated every %s\n", f.file.c_str(), set->rules.size(),
                control::format_duration(set->interval_ms).c_str());
    for (const auto& r : set->rules) {
        std::printf("  %-32s %-8s for %-5s %s\n", r.name.c_str(),
                    control::severity_name(r.severity), control::format_duration(r.for_ms).c_str(),
                    r.expr_text.c_str());
    }
    return 0;
}

void target_flags(CLI::App* c, AdminTarget& t) {
    c->add_option("--url", t.url, "Base URL of the pagoda server")->capture_default_str();
    c->add_option("--admin-api-key", t.admin_key,
                  "Admin key (default: PAGODA_ADMIN_API_KEY; none on loopback)");
}

}  // namespace

void add_rules(CLI::App& app, std::function<int()>& action) {
    auto f = std::make_shared<RulesFlags>();
    CLI::App* c = app.add_subcommand("rules", "Alert rules: export, check, show, reload");
    c->require_subcommand(1);
    CLI::App* ex = c->add_subcommand(
        "export", "Write the rules as a Prometheus rule file (promtool check rules accepts it)");
    ex->add_option("--rules", f->rules, "A TOML rule file (default: the built-in rules)")
        ->check(CLI::ExistingFile);
    ex->add_option("--format", f->format,
                   "prometheus (a rule file on the exported metric names) or toml (the built-in "
                   "rules as a file to edit)")
        ->capture_default_str()
        ->check(CLI::IsMember({"prometheus", "toml"}));
    ex->add_option("-o,--output", f->output, "Write here instead of stdout");
    ex->callback([f, &action] { action = [f] { return run_export(*f); }; });
    CLI::App* ck = c->add_subcommand("check", "Check a TOML rule file; errors give file:line:key");
    ck->add_option("file", f->file, "The rule file")->required();
    ck->callback([f, &action] { action = [f] { return run_check(*f); }; });
    CLI::App* show = c->add_subcommand("show", "A running server's rules and alert states");
    target_flags(show, f->target);
    show->callback([f, &action] {
        action = [f] {
            const int a = admin_request(f->target, "GET", "/admin/rules", "");
            return a != 0 ? a : admin_request(f->target, "GET", "/admin/alerts", "");
        };
    });
    CLI::App* rl = c->add_subcommand("reload", "Make a running server read its rule file again");
    target_flags(rl, f->target);
    rl->callback([f, &action] {
        action = [f] { return admin_request(f->target, "POST", "/admin/rules/reload", "{}"); };
    });

    CLI::App* au = app.add_subcommand(
        "audit", "A running server's audit log: alerts, actions, config and policy decisions");
    target_flags(au, f->target);
    au->add_option("--kind", f->kind,
                   "Only this kind: alert, alert_action, rules_reload, automation, refusal, "
                   "oom_rollback, block_size_decision, ...");
    au->add_option("--limit", f->limit, "Newest N events")
        ->capture_default_str()
        ->check(CLI::Range(1, 10000));
    au->callback([f, &action] {
        action = [f] {
            std::string path = fmt::format("/admin/audit?limit={}", f->limit);
            if (!f->kind.empty()) path += "&kind=" + f->kind;
            return admin_request(f->target, "GET", path, "");
        };
    });
}

}  // namespace pagoda::app
