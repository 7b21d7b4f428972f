// Scenario files: parsing with file:line errors, the shipped examples, presets and scaling.
#include "bench/scenario.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "bench/runner.h"
#include "bench/stats.h"
#include "bench/workload.h"

namespace pagoda::bench {
namespace {

TEST(Scenario, ParsesAFullFile) {
    const char* text = R"(
name = "mix"
duration = "60s"
warmup = "5s"
seed = 3
criteria = ["short: p99_ttft_ms < 800", "error_rate < 0.001"]

[arrival]
process = "gamma"
burstiness = 0.5
[[arrival.phases]]
rate = 50
duration = "30s"
[[arrival.phases]]
rate = 300

[[class]]
name = "short"
weight = 0.7
input = { dist = "normal", mean = 256, stddev = 64, max = 512 }
output = 64
slo = { ttft_ms = 500, tpot_ms = 50 }

[[class]]
name = "long"
weight = 0.3
input = { dist = "empirical", values = [1000, 2000] }
output = { dist = "uniform", low = 100, high = 200 }

[stop]
error_rate = 0.5
)";
    auto s = parse_scenario(text, "mix.toml");
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s->name, "mix");
    EXPECT_EQ(s->duration_s, 60);
    EXPECT_EQ(s->warmup_s, 5);
    ASSERT_EQ(s->arrival.phases.size(), 2u);
    EXPECT_EQ(s->arrival.phases[0].process, Phase::Process::kGamma);
    EXPECT_EQ(s->arrival.phases[0].burstiness, 0.5);
    EXPECT_EQ(s->arrival.phases[1].rate, 300);
    ASSERT_EQ(s->classes.size(), 2u);
    EXPECT_EQ(s->classes[0].input.kind, LengthDist::Kind::kNormal);
    EXPECT_EQ(s->classes[0].input.max, 512);
    EXPECT_EQ(*s->classes[0].slo.ttft_ms, 500);
    EXPECT_EQ(s->classes[1].input.values.size(), 2u);
    EXPECT_EQ(s->criteria.size(), 2u);
    EXPECT_EQ(s->stop_error_rate, 0.5);
    // The hash follows the load's shape.
    auto t = *s;
    t.classes[0].weight = 0.6;
    EXPECT_NE(t.hash(), s->hash());
}

void expect_error(const char* text, const std::string& where, const std::string& why) {
    auto s = parse_scenario(text, "bad.toml");
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_NE(s.error().message.find(where), std::string::npos) << s.error().message;
    EXPECT_NE(s.error().message.find(why), std::string::npos) << s.error().message;
}

TEST(Scenario, BadFilesSayFileLineAndReason) {
    expect_error("duration = 10\n[arrival]\nrate = 5\nrat = 6\n[[class]]\ninput = 1\noutput = 1\n",
                 "bad.toml:4:", "arrival.rat: unknown key");
    expect_error("duration = 10\n[arrival]\nrate = \"fast\"\n[[class]]\ninput = 1\noutput = 1\n",
                 "bad.toml:3:", "arrival.rate: expected a number, got a string");
    expect_error("duration = 10\n[arrival]\nrate = -5\n[[class]]\ninput = 1\noutput = 1\n",
                 "bad.toml:3:", "arrival.rate: -5 is out of range");
    expect_error("duration = 10\n[arrival]\nrate = 5\n[[class]]\ninput = 1\noutput = 1\nsl = 3\n",
                 "bad.toml:7:", "class[0].sl: unknown key");
    expect_error(
        "duration = 10\n[arrival]\nrate = 5\n[[class]]\ninput = { dist = \"zipf\" }\noutput = 1\n",
        "bad.toml:5:", "'zipf' is not allowed");
    expect_error(
        "duration = 10\n[arrival]\nrate = 5\n[[class]]\ninput = 1\noutput = 1\ncriteria = 3\n",
        "bad.toml:", "criteria");
    expect_error(
        "duration = 10\ncriteria = [\"p99_ttfb_ms < 5\"]\n[arrival]\nrate = 5\n[[class]]\ninput = "
        "1\noutput = 1\n",
        "bad.toml:2:", "unknown metric");
    expect_error("duration = \"ten\"\n[arrival]\nrate = 5\n[[class]]\ninput = 1\noutput = 1\n",
                 "bad.toml:1:", "not a duration");
    expect_error("duration = 10\n[arrival\nrate = 5\n", "bad.toml:2:", "");  // TOML syntax error
    expect_error("[arrival]\nrate = 5\n[[class]]\ninput = 1\noutput = 1\n", "bad.toml", "no limit");
    expect_error(
        "duration = 10\n[arrival]\nprocess = \"closed\"\n[[class]]\ninput = 1\noutput = 1\n",
        "bad.toml:", "needs concurrency");
    expect_error("duration = \"10h\"\n[arrival]\nrate = 100000\n[[class]]\ninput = 1\noutput = 1\n",
                 "bad.toml", "one run sends at most 5000000");
}

TEST(Scenario, ShippedExamplesParse) {
    int n = 0;
    for (const auto& e :
         std::filesystem::directory_iterator(std::string(PAGODA_SOURCE_DIR) + "/scenarios")) {
        if (e.path().extension() != ".toml") continue;
        auto s = load_scenario_file(e.path().string());
        EXPECT_TRUE(s.ok()) << e.path() << ": " << s.error().message;
        ++n;
    }
    EXPECT_GE(n, 3);
}

TEST(Scenario, PresetsAndScaling) {
    for (const auto& name : preset_names()) {
        auto s = preset(name);
        ASSERT_TRUE(s.ok()) << name;
        EXPECT_TRUE(s->validate().ok()) << name;
    }
    EXPECT_FALSE(preset("9k").ok());
    // The seed's acceptance: 8 hourly phases and a criterion per acceptance point.
    auto seed = *preset("seed-acceptance");
    EXPECT_EQ(seed.arrival.phases.size(), 8u);
    std::vector<std::string> metrics;
    for (const auto& c : seed.criteria) metrics.push_back(c.metric);
    EXPECT_EQ(metrics, (std::vector<std::string>{"error_rate", "latency_fluctuation", "p99_ttft_ms",
                                                 "mean_tpot_ms", "busy_ratio", "busy_ratio"}));
    Stats st;
    EXPECT_TRUE(std::isnan(metric_value(st, "busy_ratio")));  // no server figure: criterion fails
    st.busy_ratio = 0.7;
    EXPECT_DOUBLE_EQ(metric_value(st, "busy_ratio"), 0.7);
    // From two scrapes: the sim's modelled time first (summed over its label sets), else
    // the compute pool's; NaN for a server with neither.
    const std::map<std::string, double> before = {{"pagoda_sim_busy_seconds_total{gpu=\"0\"}", 10},
                                                  {"pagoda_compute_busy_seconds_total", 1}};
    const std::map<std::string, double> after = {{"pagoda_sim_busy_seconds_total{gpu=\"0\"}", 16},
                                                 {"pagoda_compute_busy_seconds_total", 2}};
    EXPECT_DOUBLE_EQ(busy_ratio(before, after, 10), 0.6);
    EXPECT_DOUBLE_EQ(busy_ratio({{"pagoda_compute_busy_seconds_total", 1}},
                                {{"pagoda_compute_busy_seconds_total", 4}}, 10),
                     0.3);
    EXPECT_TRUE(std::isnan(busy_ratio({}, {{"vllm:num_requests_running", 3}}, 10)));
    auto b = *preset("burst");
    b.scale(0.02);
    EXPECT_NEAR(b.arrival.phases[0].rate, 1, 1e-9);
    EXPECT_NEAR(b.arrival.phases[1].rate, 6, 1e-9);
    EXPECT_EQ(b.classes[0].input.mean, 5);  // 256 * 0.02 rounded
    b.set_duration(12);
    EXPECT_NEAR(b.arrival.phases[0].duration_s, 3, 1e-9);
    EXPECT_NEAR(b.arrival.phases[1].duration_s, 6, 1e-9);
    EXPECT_EQ(*parse_duration("250ms"), 0.25);
    EXPECT_EQ(*parse_duration("2m"), 120);
    EXPECT_EQ(*parse_duration("7"), 7);
    EXPECT_FALSE(parse_duration("-3s").ok());
}

}  // namespace
}  // namespace pagoda::bench
