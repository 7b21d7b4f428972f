// Alert rules: expression parsing and evaluation over synthetic series (windows, counter
// resets, quantiles from histogram buckets), PromQL translation, rule files and their
// errors, and the alert state machine (for, hysteresis, flapping, inhibition, external).
#include "control/alerting/alert_rules.h"

#include <gtest/gtest.h>

#include "base/check.h"
#include "control/alerting/alert_evaluator.h"
#include "metrics/prom_text.h"

namespace pagoda::control {
namespace {

// One scrape: `text` in exposition format, taken at `at_ms`.
void scrape(SeriesHistory& h, int64_t at_ms, const std::string& text) {
    auto p = metrics::parse_text(text);
    ASSERT_EQ(p.bad_lines, 0) << text;
    h.add(at_ms, p.samples);
}

std::optional<double> eval(const std::string& expr, const SeriesHistory& h, int64_t now_ms) {
    auto e = parse_expr(expr);
    EXPECT_TRUE(e.ok()) << expr << ": " << (e.ok() ? "" : e.error().message);
    return e.ok() ? evaluate(**e, h, now_ms) : std::nullopt;
}

TEST(PromText, ParsesLabelsEscapesAndSpecialValues) {
    auto p = metrics::parse_text(
        "# HELP x y\n# TYPE x counter\nx_total{a=\"1\",b=\"q\\\"z\"} 3.5\n"
        "h_bucket{le=\"+Inf\"} 7\ng NaN\nbad line here\nvllm:num 2 1700000000\n");
    ASSERT_EQ(p.samples.size(), 4u);
    EXPECT_EQ(p.samples[0].name, "x_total");
    EXPECT_EQ(p.samples[0].label("b"), "q\"z");
    EXPECT_EQ(p.samples[0].value, 3.5);
    EXPECT_EQ(p.samples[1].label("le"), "+Inf");
    EXPECT_TRUE(std::isnan(p.samples[2].value));
    EXPECT_EQ(p.samples[3].name, "vllm:num");
    EXPECT_EQ(p.bad_lines, 1);
    EXPECT_EQ(p.first_bad_line, 6);
}

TEST(RuleExpr, RateIncreaseAndResets) {
    SeriesHistory h;
    scrape(h, 0, "pagoda_requests_total{model_name=\"m\"} 10\n");
    scrape(h, 10'000, "pagoda_requests_total{model_name=\"m\"} 30\n");
    scrape(h, 20'000, "pagoda_requests_total{model_name=\"m\"} 5\n");  // restarted: +5
    EXPECT_DOUBLE_EQ(*eval("increase(requests_total[1m])", h, 20'000), 25.0);
    EXPECT_DOUBLE_EQ(*eval("rate(pagoda_requests_total[1m])", h, 20'000), 25.0 / 20.0);
    // A 15 s window holds the last two scrapes only.
    EXPECT_DOUBLE_EQ(*eval("increase(requests_total[15s])", h, 20'000), 5.0);
    // One scrape in the window: no rate.
    EXPECT_FALSE(eval("rate(requests_total[5s])", h, 20'000).has_value());
}

TEST(RuleExpr, SeriesAppearingInTheWindowStartAtZero) {
    SeriesHistory h;
    scrape(h, 0, "pagoda_request_errors_total{kind=\"timeout\"} 0\npagoda_requests_total 100\n");
    scrape(h, 5'000,
           "pagoda_request_errors_total{kind=\"timeout\"} 1\n"
           "pagoda_request_errors_total{kind=\"rejected\"} 2\n"
           "pagoda_requests_total 200\n");
    // (1 + 2) / 100; the rejected series appeared inside the window, from 0.
    EXPECT_DOUBLE_EQ(*eval("error_ratio[1m]", h, 5'000), 0.03);
    EXPECT_TRUE(eval("error_ratio[1m] > 0.01", h, 5'000).has_value());
    EXPECT_FALSE(eval("error_ratio[1m] > 0.05", h, 5'000).has_value());
    EXPECT_DOUBLE_EQ(*eval("increase(request_errors_total{kind=\"rejected\"}[1m])", h, 5'000), 2);
}

TEST(RuleExpr, QuantileFromHistogramBuckets) {
    SeriesHistory h;
    const auto hist = [](int a, int b, int c) {
        return fmt::format(
            "pagoda_time_to_first_token_seconds_bucket{{le=\"0.1\"}} {}\n"
            "pagoda_time_to_first_token_seconds_bucket{{le=\"0.5\"}} {}\n"
            "pagoda_time_to_first_token_seconds_bucket{{le=\"1\"}} {}\n"
            "pagoda_time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {}\n",
            a, b, c, c);
    };
    scrape(h, 0, hist(100, 100, 100));  // old observations, outside the window's increase
    scrape(h, 10'000, hist(150, 190, 200));
    // Window increases: 50 under 0.1, 90 under 0.5, 100 under 1. p50 = 0.1, p90 = 0.5,
    // p95 = 0.5 + 0.5 * (95 - 90) / 10 = 0.75.
    EXPECT_NEAR(*eval("quantile(0.5, ttft_seconds[1m])", h, 10'000), 0.1, 1e-12);
    EXPECT_NEAR(*eval("quantile(0.95, ttft_seconds[1m])", h, 10'000), 0.75, 1e-12);
    EXPECT_NEAR(eval("quantile(0.95, ttft_seconds[1m]) > 0.5", h, 10'000).value_or(0), 0.75, 1e-12);
    EXPECT_DOUBLE_EQ(*histogram_quantile(0.5, {{1, 0}, {HUGE_VAL, 4}}), 1.0);  // rank in +Inf
}

TEST(RuleExpr, OverTimeAndLogic) {
    SeriesHistory h;
    scrape(h, 0, "pagoda_memory_usage_perc 0.5\npagoda_num_requests_waiting 0\n");
    scrape(h, 1'000, "pagoda_memory_usage_perc 0.95\npagoda_num_requests_waiting 4\n");
    scrape(h, 2'000, "pagoda_memory_usage_perc 0.7\npagoda_num_requests_waiting 2\n");
    EXPECT_DOUBLE_EQ(*eval("max(memory_usage_perc[1m])", h, 2'000), 0.95);
    EXPECT_DOUBLE_EQ(*eval("min(memory_usage_perc[1m])", h, 2'000), 0.5);
    EXPECT_DOUBLE_EQ(*eval("avg(num_requests_waiting[1m])", h, 2'000), 2.0);
    EXPECT_DOUBLE_EQ(*eval("memory_usage_perc", h, 2'000), 0.7);
    EXPECT_TRUE(eval("memory_usage_perc > 0.6 and num_requests_waiting > 1", h, 2'000));
    EXPECT_FALSE(eval("memory_usage_perc > 0.6 and num_requests_waiting > 3", h, 2'000));
    EXPECT_TRUE(eval("memory_usage_perc > 0.9 or num_requests_waiting > 1", h, 2'000));
    EXPECT_DOUBLE_EQ(*eval("(memory_usage_perc + 0.1) * 2", h, 2'000), 1.6);
    EXPECT_FALSE(eval("num_requests_waiting / (memory_usage_perc - 0.7)", h, 2'000));  // / 0
}

TEST(RuleExpr, ErrorsSayWhatIsAllowed) {
    const auto err = [](const std::string& e) {
        auto r = parse_expr(e);
        return r.ok() ? std::string("(parsed)") : r.error().message;
    };
    EXPECT_NE(err("foo(ttft_seconds[5m]) > 1").find("unknown function 'foo'"), std::string::npos);
    EXPECT_NE(err("rate(no_such_metric[5m])").find("unknown metric 'pagoda_no_such_metric'"),
              std::string::npos);
    EXPECT_NE(err("rate(ttft_seconds[5m])").find("needs a counter"), std::string::npos);
    EXPECT_NE(err("quantile(0.9, requests_total[5m])").find("needs a histogram"),
              std::string::npos);
    EXPECT_NE(err("quantile(1.5, ttft_seconds[5m])").find("[0, 1]"), std::string::npos);
    EXPECT_NE(err("rate(requests_total[5x])").find("unit must be"), std::string::npos);
    EXPECT_NE(err("rate(requests_total)").find("needs a window"), std::string::npos);
    EXPECT_NE(err("ttft_seconds > 1").find("histogram"), std::string::npos);
    EXPECT_NE(err("1 > 2").find("metric on one side"), std::string::npos);
    EXPECT_NE(err("memory_usage_perc > ").find("column"), std::string::npos);
    EXPECT_NE(err("memory_usage_perc{a=1} > 1").find("quoted"), std::string::npos);
    // Deep nesting is refused, not a stack overflow (found by the fuzzer).
    EXPECT_NE(err(std::string(3000, '(') + "1").find("nested deeper than 64"), std::string::npos);
    EXPECT_NE(err(std::string(3000, '-') + "1").find("nested deeper than 64"), std::string::npos);
    EXPECT_EQ(err(std::string(30, '(') + "memory_usage_perc" + std::string(30, ')') + " > 1"),
              "(parsed)");
}

TEST(RuleExpr, TranslatesToPromQL) {
    auto e = parse_expr(
        "quantile(0.99, ttft_seconds[5m]) > 0.5 and rate(compute_busy_seconds_total[5m]) < 0.6");
    ASSERT_TRUE(e.ok());
    // Every aggregation keeps instance and pool: an alert is about one replica, never the
    // fleet's sum.
    EXPECT_EQ(to_promql(**e),
              "histogram_quantile(0.99, sum by (instance, pool, le) "
              "(rate(pagoda_time_to_first_token_seconds_bucket[5m]))) > 0.5 and "
              "sum by (instance, pool) (rate(pagoda_compute_busy_seconds_total[5m])) < 0.6");
    auto r = parse_expr("error_ratio[5m] > 0.01");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(to_promql(**r),
              "(sum by (instance, pool) (increase(pagoda_request_errors_total[5m])) / "
              "sum by (instance, pool) (increase(pagoda_requests_total[5m]))) > 0.01");
    auto m = parse_expr("max(memory_usage_perc[1m]) > 0.9");
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(to_promql(**m),
              "sum by (instance, pool) (max_over_time(pagoda_memory_usage_perc[1m])) > 0.9");
}

TEST(AlertRules, DefaultsParseAndFileErrorsNameLineAndKey) {
    const RuleSet d = default_rules();
    EXPECT_GE(d.rules.size(), 6u);
    for (const AlertRule& r : d.rules) {
        if (r.severity == Severity::kWarning) {
            EXPECT_EQ(r.for_ms, 300'000) << r.name;
        }
    }
    const auto err = [](const std::string& text) {
        auto r = parse_rules(text, "rules.toml");
        return r.ok() ? std::string("(parsed)") : r.error().message;
    };
    EXPECT_EQ(err("[[rule]]\nname = \"a\"\nexpr = \"memory_usage_perc > 1\"\nseverity = \"bad\"\n"),
              "rules.toml:4:rule[0].severity: must be warning, critical or severe");
    EXPECT_NE(err("[[rule]]\nname = \"a\"\nexpr = \"nope(x[1m]) > 1\"\n")
                  .find("rules.toml:3:rule[0].expr: column 6: unknown function 'nope'"),
              std::string::npos);
    EXPECT_NE(err("[[rule]]\nname = \"a\"\nexpr = \"memory_usage_perc > 1\"\nfor = \"5 min\"\n")
                  .find("rules.toml:4:rule[0].for: bad duration"),
              std::string::npos);
    EXPECT_NE(
        err("[[rule]]\nname = \"a\"\nexpr = \"memory_usage_perc > 1\"\nactions = [\"page\"]\n")
            .find("unknown action"),
        std::string::npos);
    EXPECT_NE(err("[[rule]]\nname = \"a\"\nexpr = \"memory_usage_perc > 1\"\nactions = "
                  "[\"knob_step\"]\n")
                  .find("needs a [rule.knob_step] table"),
              std::string::npos);
    EXPECT_NE(err("[[rule]]\nname = \"a\"\nexpr = \"memory_usage_perc > 1\"\ncolour = 1\n")
                  .find("rule[0].colour: unknown key"),
              std::string::npos);
    EXPECT_NE(err("[[rule]]\nname = \"a\"\nexpr = \"x\"\n[[rule]]\nname = \"a\"\n")
                  .find("unknown metric"),
              std::string::npos);
    EXPECT_NE(err("[[rule\n").find("rules.toml:1:"), std::string::npos);
}

// A rule over a gauge the test sets directly.
struct Fixture {
    RuleSet set;
    SeriesHistory h;
    AlertEvaluator ev;
    explicit Fixture(const std::string& toml) {
        auto r = parse_rules(toml, "t.toml");
        PAGODA_CHECK(r.ok()) << r.error().message;
        set = *r;
        ev.set_rules(set);
    }
    std::vector<Transition> at(int64_t ms, double waiting) {
        h.add(
            ms,
            metrics::parse_text(fmt::format("pagoda_num_requests_waiting {}\n", waiting)).samples);
        return ev.evaluate(h, ms);
    }
};

std::string kinds(const std::vector<Transition>& ts) {
    std::string s;
    for (const auto& t : ts) s += t.alert.rule + ":" + transition_name(t.kind) + " ";
    return s;
}

TEST(AlertEvaluator, ForDurationHysteresisAndFlapping) {
    Fixture f(
        "[[rule]]\nname = \"Q\"\nexpr = \"num_requests_waiting > 5\"\nfor = \"10s\"\n"
        "keep_firing_for = \"20s\"\n");
    EXPECT_EQ(kinds(f.at(0, 9)), "Q:pending ");
    EXPECT_EQ(kinds(f.at(5'000, 9)), "");
    EXPECT_EQ(kinds(f.at(10'000, 9)), "Q:firing ");
    EXPECT_DOUBLE_EQ(*f.ev.find("Q")->value, 9);
    // Flapping below the threshold for less than keep_firing_for: still firing.
    EXPECT_EQ(kinds(f.at(15'000, 1)), "");
    EXPECT_EQ(kinds(f.at(20'000, 9)), "");
    EXPECT_EQ(kinds(f.at(30'000, 1)), "");
    EXPECT_EQ(f.ev.find("Q")->state, AlertState::kFiring);
    EXPECT_EQ(kinds(f.at(40'000, 1)), "Q:resolved ");
    // A flapping signal shorter than `for` never fires.
    for (int64_t t = 50'000; t < 120'000; t += 10'000) {
        const auto ts = f.at(t, (t / 10'000) % 2 ? 9 : 1);
        EXPECT_EQ(kinds(ts).find("firing"), std::string::npos) << t;
    }
}

TEST(AlertEvaluator, SevereInhibitsCriticalAndWarningOfTheSameTarget) {
    Fixture f(
        "[[rule]]\nname = \"W\"\nexpr = \"num_requests_waiting > 1\"\n"
        "[[rule]]\nname = \"C\"\nexpr = \"num_requests_waiting > 1\"\nseverity = \"critical\"\n"
        "[[rule]]\nname = \"O\"\nexpr = \"num_requests_waiting > 1\"\nseverity = \"critical\"\n"
        "labels = { target = \"other\" }\n"
        "[[rule]]\nname = \"S\"\nexpr = \"num_requests_waiting > 10\"\nseverity = \"severe\"\n"
        "keep_firing_for = \"0s\"\n");
    f.at(0, 20);
    EXPECT_TRUE(f.ev.find("W")->inhibited);
    EXPECT_TRUE(f.ev.find("C")->inhibited);
    EXPECT_FALSE(f.ev.find("O")->inhibited);  // another target
    EXPECT_FALSE(f.ev.find("S")->inhibited);
    // The severe alert resolves: the others fire again (their actions were held back).
    const auto ts = f.at(1'000, 5);
    EXPECT_EQ(kinds(ts), "S:resolved C:firing W:firing ");
    for (const auto& t : ts) EXPECT_FALSE(t.alert.inhibited);
}

TEST(AlertEvaluator, ExternalAlertsComeAndGo) {
    Fixture f(
        "[[rule]]\nname = \"X\"\nexpr = \"num_requests_waiting > 100\"\nseverity = \"critical\"\n");
    const AlertRule& r = *f.set.find("X");
    auto t = f.ev.set_external(r, true, 1'000);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->kind, Transition::Kind::kFiring);
    EXPECT_FALSE(f.ev.set_external(r, true, 2'000));  // already firing
    EXPECT_EQ(kinds(f.at(3'000, 0)), "");             // the local expression does not resolve it
    t = f.ev.set_external(r, false, 4'000);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->kind, Transition::Kind::kResolved);
}

}  // namespace
}  // namespace pagoda::control
