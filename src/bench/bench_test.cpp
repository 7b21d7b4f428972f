#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "bench/baseline.h"
#include "bench/output.h"
#include "bench/runner.h"
#include "bench/scenario.h"
#include "bench/stats.h"
#include "bench/workload.h"
#include "http/client.h"

namespace pagoda::bench {
namespace {

struct GapStats {
    double mean, cv;
    size_t n;
};
GapStats gap_stats(const std::vector<double>& t) {
    std::vector<double> g;
    for (size_t i = 1; i < t.size(); ++i) g.push_back(t[i] - t[i - 1]);
    Summary s = summarize(g);
    return {s.mean, s.stddev / s.mean, g.size()};
}

Phase phase(Phase::Process p, double rate, double dur = 0, double burst = 1) {
    Phase ph;
    ph.process = p;
    ph.rate = rate;
    ph.duration_s = dur;
    ph.burstiness = burst;
    return ph;
}

TEST(Arrivals, PoissonHasTheRateAndUnitDispersion) {
    auto t = arrival_times({phase(Phase::Process::kPoisson, 50)}, 400, 0, 7);
    // 20000 expected arrivals: the count is within 4 standard deviations (sqrt(20000) ~ 141).
    EXPECT_NEAR(double(t.size()), 20000, 4 * std::sqrt(20000.0));
    auto g = gap_stats(t);
    EXPECT_NEAR(g.mean, 0.02, 0.02 * 0.03);
    EXPECT_NEAR(g.cv, 1.0, 0.03);  // exponential gaps: CV = 1
}

TEST(Arrivals, GammaBurstinessSetsTheDispersion) {
    // shape k: CV^2 = 1/k. k = 0.25 -> CV = 2 (burstier); k = 4 -> CV = 0.5 (smoother).
    auto bursty =
        gap_stats(arrival_times({phase(Phase::Process::kGamma, 20, 0, 0.25)}, 2000, 0, 3));
    EXPECT_NEAR(bursty.mean, 0.05, 0.05 * 0.06);
    EXPECT_NEAR(bursty.cv, 2.0, 0.15);
    auto smooth = gap_stats(arrival_times({phase(Phase::Process::kGamma, 20, 0, 4)}, 2000, 0, 3));
    EXPECT_NEAR(smooth.mean, 0.05, 0.05 * 0.02);
    EXPECT_NEAR(smooth.cv, 0.5, 0.02);
}

TEST(Arrivals, ConstantIsExactAndCountLimited) {
    auto t = arrival_times({phase(Phase::Process::kConstant, 4)}, 10, 0, 1);
    ASSERT_EQ(t.size(), 40u);
    for (size_t i = 0; i < t.size(); ++i) EXPECT_NEAR(t[i], 0.25 * double(i), 1e-9);
    EXPECT_EQ(arrival_times({phase(Phase::Process::kConstant, 4)}, 10, 7, 1).size(), 7u);
    // No horizon: the count alone limits the run.
    EXPECT_EQ(arrival_times({phase(Phase::Process::kPoisson, 4)}, 0, 25, 1).size(), 25u);
}

TEST(Arrivals, PiecewisePhasesStepTheRate) {
    auto t = arrival_times(
        {phase(Phase::Process::kPoisson, 10, 50), phase(Phase::Process::kPoisson, 60, 50)}, 100, 0,
        11);
    size_t first = size_t(std::count_if(t.begin(), t.end(), [](double x) { return x < 50; }));
    size_t second = t.size() - first;
    EXPECT_NEAR(double(first), 500, 4 * std::sqrt(500.0));
    EXPECT_NEAR(double(second), 3000, 4 * std::sqrt(3000.0));
    EXPECT_TRUE(std::is_sorted(t.begin(), t.end()));
    EXPECT_LT(t.back(), 100);
}

TEST(Lengths, DistributionsHaveTheirMoments) {
    std::mt19937_64 rng(5);
    LengthDist n;
    n.kind = LengthDist::Kind::kNormal;
    n.mean = 500;
    n.stddev = 50;
    std::vector<double> v;
    for (int i = 0; i < 20000; ++i) v.push_back(double(sample_length(n, rng)));
    auto s = summarize(v);
    EXPECT_NEAR(s.mean, 500, 2);
    EXPECT_NEAR(s.stddev, 50, 2);

    LengthDist ln;
    ln.kind = LengthDist::Kind::kLogNormal;
    ln.mean = 300;
    ln.stddev = 150;
    v.clear();
    for (int i = 0; i < 40000; ++i) v.push_back(double(sample_length(ln, rng)));
    s = summarize(v);
    EXPECT_NEAR(s.mean, 300, 6);
    EXPECT_NEAR(s.stddev, 150, 10);
    EXPECT_GT(s.p50, 0);
    EXPECT_LT(s.p50, s.mean);  // right-skewed

    LengthDist u;
    u.kind = LengthDist::Kind::kUniform;
    u.low = 10;
    u.high = 20;
    for (int i = 0; i < 2000; ++i) {
        auto x = sample_length(u, rng);
        EXPECT_GE(x, 10);
        EXPECT_LE(x, 20);
    }
    LengthDist e;
    e.kind = LengthDist::Kind::kEmpirical;
    e.values = {3, 7, 100};
    for (int i = 0; i < 200; ++i) {
        auto x = sample_length(e, rng);
        EXPECT_TRUE(x == 3 || x == 7 || x == 100);
    }
    LengthDist clamp = n;
    clamp.min = 490;
    clamp.max = 510;
    for (int i = 0; i < 2000; ++i) {
        auto x = sample_length(clamp, rng);
        EXPECT_GE(x, 490);
        EXPECT_LE(x, 510);
    }
}

TEST(Plan, ClassWeightsSplitTheRequests) {
    auto s = *preset("mix-70-30");
    s.duration_s = 500;  // 20 rps x 500 s = 10000 requests
    auto plan = *make_plan(s);
    double n = double(plan.size());
    double shorts =
        double(std::count_if(plan.begin(), plan.end(), [](const auto& r) { return r.klass == 0; }));
    EXPECT_NEAR(shorts / n, 0.7, 4 * std::sqrt(0.7 * 0.3 / n));
    // Same seed, same plan.
    auto again = *make_plan(s);
    ASSERT_EQ(again.size(), plan.size());
    for (size_t i = 0; i < plan.size(); i += 97) {
        EXPECT_EQ(again[i].at_s, plan[i].at_s);
        EXPECT_EQ(again[i].input_len, plan[i].input_len);
    }
}

TEST(Plan, AClosedLoopWithADurationBuildsAtMostThePool) {
    Scenario s;
    s.classes.push_back({});
    s.arrival.kind = Arrival::Kind::kClosed;
    s.arrival.concurrency = 4;
    s.requests = 20000;
    s.duration_s = 12;
    EXPECT_EQ(make_plan(s, 4096)->size(), 4096u);  // cycled; the run stops at 20000 or 12 s
    s.requests = 100;
    EXPECT_EQ(make_plan(s, 4096)->size(), 100u);
    s.duration_s = 0;  // a count alone: every request its own prompt
    s.requests = 20000;
    EXPECT_EQ(make_plan(s, 4096)->size(), 20000u);
}

TEST(Stats, PercentilesMatchHandComputedValues) {
    // Linear interpolation between closest ranks: position q * (n - 1).
    std::vector<double> v = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
    auto s = summarize(v);
    EXPECT_DOUBLE_EQ(s.p50, 5.5);    // between 5 and 6
    EXPECT_NEAR(s.p90, 9.1, 1e-12);  // 9 + 0.1 * (10 - 9)
    EXPECT_NEAR(s.p99, 9.91, 1e-12);
    EXPECT_DOUBLE_EQ(s.max, 10);
    EXPECT_DOUBLE_EQ(s.mean, 5.5);
    EXPECT_NEAR(s.stddev, std::sqrt(82.5 / 9), 1e-12);  // sample standard deviation
    EXPECT_DOUBLE_EQ(summarize({42}).p99, 42);
    EXPECT_TRUE(std::isnan(summarize({}).p50));
}

RequestRecord rec(int klass, double sent, double first, double done, int tokens,
                  std::string err = "") {
    RequestRecord r;
    r.klass = klass;
    r.scheduled_s = sent;
    r.sent_s = sent;
    r.first_token_s = first;
    r.done_s = done;
    for (int i = 0; i < tokens; ++i)
        r.token_s.push_back(first + (done - first) * (tokens > 1 ? double(i) / (tokens - 1) : 0));
    r.completion_tokens = tokens;
    r.prompt_tokens = 10;
    r.error_kind = std::move(err);
    r.status = r.error_kind.empty() ? 200 : 503;
    return r;
}

TEST(Stats, GoodputTpotAndErrorRateMatchHandComputedValues) {
    Scenario s;
    RequestClass c;
    c.slo.ttft_ms = 100;
    c.slo.tpot_ms = 20;
    s.classes = {c};
    std::vector<RequestRecord> rs = {
        rec(0, 0.0, 0.05, 0.25, 11),          // ttft 50, tpot 20 -> meets
        rec(0, 1.0, 1.20, 1.30, 11),          // ttft 200 -> misses
        rec(0, 2.0, 2.01, 2.51, 11),          // tpot 50 -> misses
        rec(0, 3.0, 3.02, 3.12, 11),          // ttft 20, tpot 10 -> meets
        rec(0, 3.5, -1, 3.6, 0, "http_5xx"),  // error: counts as a failure
    };
    Report r = build_report(s, rs, 4.0);
    const Stats& o = r.overall;
    EXPECT_EQ(o.sent, 5);
    EXPECT_EQ(o.completed, 4);
    EXPECT_EQ(o.failed, 1);
    EXPECT_DOUBLE_EQ(o.error_rate, 0.2);
    EXPECT_DOUBLE_EQ(o.goodput_ratio, 0.4);
    EXPECT_NEAR(o.span_s, 3.6, 1e-12);  // first send 0.0 to last completion 3.6
    EXPECT_NEAR(o.goodput_rps, 2 / 3.6, 1e-12);
    EXPECT_NEAR(o.requests_per_s, 4 / 3.6, 1e-12);
    EXPECT_NEAR(o.output_tokens_per_s, 44 / 3.6, 1e-12);
    EXPECT_NEAR(o.ttft.p50, (50 + 20) / 2.0 + 0 * 1, 35.1);  // sorted {10, 20, 50, 200}: p50 = 35
    EXPECT_NEAR(o.ttft.p50, 35, 1e-9);
    EXPECT_NEAR(o.tpot.max, 50, 1e-9);
    EXPECT_NEAR(o.tpot.p50, 15, 1e-9);  // {10, 10, 20, 50}
    EXPECT_EQ(o.itl.n, 40u);            // token-weighted: every gap counts
    EXPECT_EQ(o.errors.at("http_5xx"), 1);
    EXPECT_EQ(r.usage_mismatches, 0);
    // The per-second series sees one send per second and the error in second 3.
    EXPECT_EQ(r.series[0].sent, 1);
    EXPECT_EQ(r.series[3].sent, 2);
    EXPECT_EQ(r.series[3].errors, 1);
}

TEST(Stats, WarmupAndCooldownAreLeftOut) {
    Scenario s;
    s.classes = {RequestClass{}};
    s.duration_s = 10;
    s.warmup_s = 2;
    s.cooldown_s = 2;
    std::vector<RequestRecord> rs;
    for (int i = 0; i < 10; ++i) rs.push_back(rec(0, i, i + 0.1, i + 0.2, 2));
    Report r = build_report(s, rs, 10.5);
    EXPECT_EQ(r.overall.sent, 6);  // scheduled at 2..7
}

TEST(Criteria, ParsingAndVerdicts) {
    auto c = parse_criterion("short: p99_ttft_ms <= 800");
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->klass, "short");
    EXPECT_EQ(c->metric, "p99_ttft_ms");
    EXPECT_EQ(c->op, "<=");
    EXPECT_EQ(c->threshold, 800);
    EXPECT_TRUE(parse_criterion("error_rate<0.001").ok());
    EXPECT_TRUE(parse_criterion("output_tokens_per_s > 120").ok());
    auto bad_metric = parse_criterion("p99_latency < 3");
    ASSERT_FALSE(bad_metric.ok());
    EXPECT_NE(bad_metric.error().message.find("unknown metric 'p99_latency'"), std::string::npos);
    EXPECT_FALSE(parse_criterion("p99_ttft_ms = 3").ok());
    EXPECT_FALSE(parse_criterion("p99_ttft_ms < fast").ok());

    Scenario s;
    RequestClass a, b;
    a.name = "short";
    b.name = "long";
    s.classes = {a, b};
    s.criteria = {*parse_criterion("short: p99_ttft_ms < 100"),
                  *parse_criterion("error_rate < 0.5"),
                  *parse_criterion("long: p50_e2e_ms < 1000")};
    std::vector<RequestRecord> rs = {rec(0, 0, 0.05, 0.1, 3), rec(1, 0, 0.5, 2.0, 3)};
    Report r = build_report(s, rs, 2);
    ASSERT_EQ(r.criteria.size(), 3u);
    EXPECT_TRUE(r.criteria[0].pass);
    EXPECT_TRUE(r.criteria[1].pass);
    EXPECT_FALSE(r.criteria[2].pass);  // long e2e is 2000 ms
    EXPECT_EQ(r.verdict, "fail");
    s.criteria.pop_back();
    evaluate_criteria(s, r);
    EXPECT_EQ(r.verdict, "pass");
    // A metric without data fails rather than passing vacuously.
    s.criteria = {*parse_criterion("long: p99_tpot_ms < 5")};
    std::vector<RequestRecord> only_short = {rec(0, 0, 0.05, 0.1, 3)};
    Report r2 = build_report(s, only_short, 1);
    EXPECT_FALSE(r2.criteria[0].pass);
    EXPECT_TRUE(std::isnan(r2.criteria[0].value));
    s.criteria.clear();
    evaluate_criteria(s, r2);
    EXPECT_EQ(r2.verdict, "none");
}

std::vector<std::map<std::string, double>> runs(std::initializer_list<double> ttft, double tput) {
    std::vector<std::map<std::string, double>> out;
    for (double t : ttft)
        out.push_back({{"p99_ttft_ms", t}, {"output_tokens_per_s", tput}, {"error_rate", 0}});
    return out;
}

std::string verdict_of(const std::vector<MetricDelta>& d, const std::string& m) {
    for (const auto& x : d) {
        if (x.metric == m) return x.verdict;
    }
    return "?";
}

TEST(Baseline, FlagsA30PercentRegressionAndPassesA2PercentChange) {
    auto base = runs({100, 104, 96}, 500);
    auto d = compare_runs(base, runs({130, 134, 126}, 500), 0.05);
    EXPECT_EQ(verdict_of(d, "p99_ttft_ms"), "regression");
    EXPECT_EQ(verdict_of(d, "output_tokens_per_s"), "ok");
    d = compare_runs(base, runs({102, 106, 98}, 490), 0.05);
    EXPECT_EQ(verdict_of(d, "p99_ttft_ms"), "ok");
    EXPECT_EQ(verdict_of(d, "output_tokens_per_s"), "ok");
    // Throughput: lower is worse.
    d = compare_runs(base, runs({100, 104, 96}, 350), 0.05);
    EXPECT_EQ(verdict_of(d, "output_tokens_per_s"), "regression");
    d = compare_runs(base, runs({70, 72, 68}, 500), 0.05);
    EXPECT_EQ(verdict_of(d, "p99_ttft_ms"), "improved");
    // The noise band widens with noisy repeats: a 10% change inside wide noise is not flagged.
    auto noisy = runs({60, 100, 140}, 500);
    d = compare_runs(noisy, runs({110, 70, 150}, 500), 0.05);
    EXPECT_EQ(verdict_of(d, "p99_ttft_ms"), "ok");
    for (const auto& x : d) {
        if (x.metric == "p99_ttft_ms") {
            EXPECT_GT(x.noise_band, 0.5);
        }
    }
    // Single runs: the tolerance alone decides.
    EXPECT_EQ(verdict_of(compare_runs(runs({100}, 1), runs({102}, 1), 0.05), "p99_ttft_ms"), "ok");
    EXPECT_EQ(verdict_of(compare_runs(runs({100}, 1), runs({130}, 1), 0.05), "p99_ttft_ms"),
              "regression");
    // Student's t with 2 degrees of freedom has the closed form (2p - 1) / sqrt(2p(1 - p)).
    const double t2 = 0.95 / std::sqrt(2 * 0.975 * 0.025);  // 4.3027
    EXPECT_NEAR(ci95_half_width({96, 100, 104}), t2 * 4 / std::sqrt(3.0), 1e-9);
}

TEST(Baseline, StoreRecordsSavesAndReadsBack) {
    auto path =
        std::filesystem::temp_directory_path() / fmt::format("pagoda-bench-test-{}.db", ::getpid());
    std::filesystem::remove(path);
    {
        auto store = BaselineStore::open(path.string());
        ASSERT_TRUE(store.ok()) << store.error().message;
        RunRow row;
        row.scenario = "mix";
        row.scenario_hash = "abc";
        row.model = "m";
        row.metrics = {{"p99_ttft_ms", 123.5}};
        auto a = (*store)->record(row);
        auto b = (*store)->record(row);
        ASSERT_TRUE(a.ok() && b.ok());
        ASSERT_TRUE((*store)->save_baseline("v1", {*a, *b}).ok());
        auto c = (*store)->record(row);
        ASSERT_TRUE((*store)->save_baseline("v1", {*c}).ok());  // replaces the set
    }
    auto store = BaselineStore::open(path.string());
    ASSERT_TRUE(store.ok());
    auto rows = (*store)->baseline("v1");
    ASSERT_TRUE(rows.ok());
    ASSERT_EQ(rows->size(), 1u);
    EXPECT_EQ(rows->at(0).id, 3);
    EXPECT_DOUBLE_EQ(rows->at(0).metrics.at("p99_ttft_ms"), 123.5);
    EXPECT_EQ((*store)->history(10)->size(), 3u);
    EXPECT_TRUE((*store)->baseline("nope")->empty());
    std::filesystem::remove(path);
}

TEST(Significance, MannWhitney) {
    auto r = mann_whitney({1, 2, 3}, {4, 5, 6});
    EXPECT_DOUBLE_EQ(r.u, 0);
    std::mt19937_64 rng(1);
    std::normal_distribution<double> n(100, 10), shifted(110, 10);
    std::vector<double> a, b, c;
    for (int i = 0; i < 400; ++i) {
        a.push_back(n(rng));
        b.push_back(n(rng));
        c.push_back(shifted(rng));
    }
    EXPECT_GT(mann_whitney(a, b).p_value, 0.01);
    EXPECT_LT(mann_whitney(a, c).p_value, 1e-6);
    EXPECT_DOUBLE_EQ(mann_whitney({5, 5, 5}, {5, 5}).p_value, 1.0);  // all tied
}

TEST(Prompts, BuilderHitsExactTokenCounts) {
    // A fake tokenizer: BOS, then one token per word, two for words longer than four letters,
    // one per '.'. Exactness must not depend on words being one token each.
    TokenCounter counter = [](const std::string& text) -> Result<int64_t> {
        int64_t n = 1;
        size_t i = 0;
        while (i < text.size()) {
            if (text[i] == ' ') {
                ++i;
                continue;
            }
            if (text[i] == '.' || text[i] == '!') {
                ++n;
                ++i;
                continue;
            }
            size_t j = i;
            while (j < text.size() && std::isalpha(static_cast<unsigned char>(text[j]))) ++j;
            if (j == i) j = i + 1;
            n += (j - i) > 4 ? 2 : 1;
            i = j;
        }
        return n;
    };
    PromptBuilder b(counter);
    for (int64_t target : {1, 2, 3, 17, 100, 513, 2048}) {
        for (uint64_t v = 0; v < 3; ++v) {
            auto built = b.build(target, v);
            ASSERT_TRUE(built.ok());
            EXPECT_EQ(built->tokens, target) << "target " << target;
            EXPECT_EQ(*counter(built->text), target);
        }
    }
    // Different variants start differently (no shared prefix for a prefix cache to find).
    EXPECT_NE(b.build(200, 1)->text.substr(0, 20), b.build(200, 2)->text.substr(0, 20));
    EXPECT_LT(double(b.calls()) / 21, 12);  // a handful of tokenizer calls per prompt
    // Many prompts of one length (a run's): the word count that reached it is tried first.
    const int64_t before = b.calls();
    for (uint64_t v = 10; v < 210; ++v) ASSERT_EQ(b.build(256, v)->tokens, 256);
    EXPECT_LT(double(b.calls() - before) / 200, 3.2);  // 3.85 without, 2.8 with
}

TEST(Http, ParseUrl) {
    auto u = http::parse_url("http://127.0.0.1:8000/v1/");
    ASSERT_TRUE(u.ok());
    EXPECT_EQ(u->host, "127.0.0.1");
    EXPECT_EQ(u->port, "8000");
    EXPECT_EQ(u->base_path, "/v1");
    EXPECT_EQ(http::parse_url("http://example")->port, "80");
    EXPECT_FALSE(http::parse_url("https://x").ok());
    EXPECT_FALSE(http::parse_url("ftp://x").ok());
    EXPECT_FALSE(http::parse_url("http://x:99999").ok());
    EXPECT_FALSE(http::parse_url("http://:80").ok());
}

TEST(Http, UnreachableServerIsAnErrorNotACrash) {
    // Port 1 on loopback: nothing listens there.
    auto c = http::Client::create("http://127.0.0.1:1");
    ASSERT_TRUE(c.ok());
    auto r = (*c)->fetch(
        {.method = "GET", .path = "/v1/models", .body = {}, .content_type = {}, .headers = {}});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("cannot connect to 127.0.0.1:1"), std::string::npos)
        << r.error().message;
}

TEST(Output, JsonHasTheDocumentedTopLevelFields) {
    Scenario s;
    s.classes = {RequestClass{}};
    s.criteria = {*parse_criterion("p99_ttft_ms < 1000")};
    std::vector<RequestRecord> rs = {rec(0, 0, 0.05, 0.1, 3)};
    Report r = build_report(s, rs, 1);
    auto j = report_json(r);
    for (const char* k : {"requests", "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms",
                          "output_tokens_per_s", "requests_per_s", "goodput_rps", "error_rate",
                          "classes", "verdict", "criteria", "series"}) {
        EXPECT_TRUE(j.contains(k)) << k;
    }
    for (const char* k : {"mean", "p50", "p90", "p99"}) EXPECT_TRUE(j["ttft_ms"].contains(k)) << k;
    EXPECT_EQ(j["requests"]["sent"], 1);
    EXPECT_EQ(j["verdict"], "pass");
    EXPECT_EQ(j["criteria"][0]["name"], "p99_ttft_ms < 1000");
    std::string html = html_report(r, s, rs);
    EXPECT_NE(html.find("<svg"), std::string::npos);
    EXPECT_EQ(html.find("<script"), std::string::npos);
    EXPECT_TRUE(j["server_cpu_ms_per_request"].is_null()) << "no server metrics";
    // The server's CPU seconds over the run, per request sent: 0.5 s over 1 request.
    r.server_metrics_json =
        R"({"pagoda_process_cpu_seconds_total{model_name=\"m\"}": 0.5, "x_total": 3})";
    EXPECT_DOUBLE_EQ(server_cpu_ms_per_request(r), 500.0);
    EXPECT_NE(terminal_summary(r).find("server CPU: 500.000 ms per request"), std::string::npos)
        << terminal_summary(r);
}

// "-?digits(.d{1,2})?k?"
bool is_round_tick(std::string label) {
    if (!label.empty() && label.back() == 'k') label.pop_back();
    if (!label.empty() && label.front() == '-') label.erase(0, 1);
    const size_t dot = label.find('.');
    const std::string whole = label.substr(0, dot);
    const std::string frac = dot == std::string::npos ? "" : label.substr(dot + 1);
    const auto digits = [](const std::string& t) {
        return std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (whole.empty() || !digits(whole) || !digits(frac)) return false;
    return dot == std::string::npos || (!frac.empty() && frac.size() <= 2);
}

TEST(Output, ChartTicksAreRoundAndAVerdictOfNoneIsNotAPass) {
    Scenario s;
    s.classes = {RequestClass{}};
    std::vector<RequestRecord> rs;
    for (int i = 0; i < 40; ++i) {  // awkward latencies: 0.79 ms, 4.688 ms, ...
        rs.push_back(rec(0, 0.0009383 * i, 0.0007904 + 0.0001172 * i, 0.004688 + 0.0003 * i, 3));
    }
    Report r = build_report(s, rs, 1);
    ASSERT_EQ(r.verdict, "none");
    const std::string html = html_report(r, s, rs);
    // Every tick label: digits with at most two decimals (1, 2, 2.5 or 5 times 10^k steps).
    // (Plain scanning, not <regex>: GCC 12's regex trips -Wmaybe-uninitialized at -O1.)
    int ticks = 0;
    for (const char* anchor :
         {"font-size='10' text-anchor='end'>", "font-size='10' text-anchor='middle'>"}) {
        const std::string a = anchor;
        for (size_t at = html.find(a); at != std::string::npos;
             at = html.find(a, at + 1), ++ticks) {
            const size_t from = at + a.size();
            const std::string label = html.substr(from, html.find('<', from) - from);
            EXPECT_TRUE(is_round_tick(label)) << label;
        }
    }
    EXPECT_GT(ticks, 20);
    EXPECT_NE(html.find("<span class='none'>none"), std::string::npos);
    EXPECT_EQ(html.find("<span class='pass'>"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::bench
