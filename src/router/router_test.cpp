// Unit tests of the router's decisions: balancing, pool roles, ejection, schedules across
// midnight and DST, the breaker, the canary judge, configuration errors, SSE splitting.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <random>

#include "router/backend.h"
#include "router/balancer.h"
#include "router/judges.h"
#include "router/router_config.h"
#include "router/schedule.h"
#include "router/sse.h"

namespace pagoda::router {
namespace {

Candidate cand(uint64_t id, int64_t outstanding, double waiting = 0, double kv = 0) {
    Candidate c;
    c.id_hash = mix64(id + 1);
    c.outstanding = outstanding;
    c.waiting = waiting;
    c.kv_usage = kv;
    return c;
}

TEST(Balancer, LeastLoadedCountsOutstandingWaitingAndKv) {
    std::vector<Candidate> cs = {cand(0, 5), cand(1, 2), cand(2, 3)};
    EXPECT_EQ(pick_backend(cs, {}, 1.5, 4), 1);
    cs[1].waiting = 4;  // 2 + 4 = 6 > 5 and 3
    EXPECT_EQ(pick_backend(cs, {}, 1.5, 4), 2);
    cs[2].kv_usage = 1;  // 3 + 4 = 7
    EXPECT_EQ(pick_backend(cs, {}, 1.5, 4), 0);
    cs[0].healthy = false;
    EXPECT_EQ(pick_backend(cs, {}, 1.5, 4), 1);
    cs[1].saturated = true;
    cs[2].excluded = true;
    EXPECT_EQ(pick_backend(cs, {}, 1.5, 4), -1);
}

TEST(Balancer, PrefixAffinityIsStableAndBoundedByLoad) {
    std::vector<Candidate> cs = {cand(0, 0), cand(1, 0), cand(2, 0), cand(3, 0)};
    RouteKey k;
    k.prefix = hash64("You are a helpful assistant. Summarise:");
    const int first = pick_backend(cs, k, 1.5, 4);
    ASSERT_GE(first, 0);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(pick_backend(cs, k, 1.5, 4), first);
    // Different prefixes spread over the backends.
    std::map<int, int> spread;
    for (int i = 0; i < 400; ++i) {
        RouteKey o;
        o.prefix = hash64("prompt " + std::to_string(i));
        ++spread[pick_backend(cs, o, 1.5, 4)];
    }
    EXPECT_EQ(spread.size(), 4u);
    for (const auto& [b, n] : spread) EXPECT_GT(n, 50) << "backend " << b;
    // Overloaded beyond factor x mean + 1: the prefix goes elsewhere.
    cs[size_t(first)].outstanding = 20;  // mean 5, bound 8.5
    const int moved = pick_backend(cs, k, 1.5, 4);
    EXPECT_NE(moved, first);
    cs[size_t(first)].outstanding = 6;  // mean 1.5, bound 3.25: still over
    EXPECT_NE(pick_backend(cs, k, 1.5, 4), first);
    cs[size_t(first)].outstanding = 2;  // mean 0.5, bound 1.75: over by a little
    EXPECT_NE(pick_backend(cs, k, 1.5, 4), first);
    cs[size_t(first)].outstanding = 1;  // bound 1.375: kept
    EXPECT_EQ(pick_backend(cs, k, 1.5, 4), first);
}

TEST(Balancer, SessionSticksWhateverTheLoad) {
    std::vector<Candidate> cs = {cand(0, 0), cand(1, 0), cand(2, 0)};
    RouteKey k;
    k.session = hash64("user-42");
    const int b = pick_backend(cs, k, 1.5, 4);
    cs[size_t(b)].outstanding = 100;
    EXPECT_EQ(pick_backend(cs, k, 1.5, 4), b);
    cs[size_t(b)].healthy = false;  // only a dead backend moves the session
    const int other = pick_backend(cs, k, 1.5, 4);
    EXPECT_NE(other, b);
    EXPECT_GE(other, 0);
}

PoolView pool(const std::string& name, PoolRole role, double weight, std::vector<Candidate> cs) {
    return {name, role, weight, std::move(cs)};
}

TEST(Balancer, PoolsByWeightThenStandbyThenDr) {
    std::vector<PoolView> ps = {pool("day", PoolRole::kPrimary, 90, {cand(0, 0)}),
                                pool("night", PoolRole::kPrimary, 10, {cand(1, 0)}),
                                pool("standby", PoolRole::kStandby, 0, {cand(2, 0)}),
                                pool("dr", PoolRole::kDr, 0, {cand(3, 0)})};
    int night = 0;
    for (int i = 0; i < 1000; ++i) {
        RouteKey k;
        k.draw = (i + 0.5) / 1000;
        const Choice c = choose(ps, k, false, 1.5, 4);
        night += c.pool == 1 ? 1 : 0;
        EXPECT_EQ(c.reason, "weighted");
    }
    EXPECT_EQ(night, 100);
    RouteKey k;
    k.draw = 0.95;  // lands on night
    ps[1].backends[0].healthy = false;
    EXPECT_EQ(choose(ps, k, false, 1.5, 4).pool, 0);  // night's share falls back to day
    ps[0].backends[0].healthy = false;
    Choice c = choose(ps, k, false, 1.5, 4);
    EXPECT_EQ(c.pool, 2);
    EXPECT_EQ(c.reason, "standby");
    ps[2].backends[0].healthy = false;
    c = choose(ps, k, false, 1.5, 4);
    EXPECT_EQ(c.pool, 3);
    EXPECT_EQ(c.reason, "dr");
    ps[3].backends[0].saturated = true;
    c = choose(ps, k, false, 1.5, 4);
    EXPECT_EQ(c.pool, -1);
    EXPECT_TRUE(c.saturated);
    // The severe hook: DR takes everything even with healthy primaries.
    ps[0].backends[0].healthy = true;
    ps[3].backends[0].saturated = false;
    c = choose(ps, k, true, 1.5, 4);
    EXPECT_EQ(c.pool, 3);
    EXPECT_EQ(c.reason, "dr_forced");
}

TEST(Ejection, AfterConsecutiveFailuresWithDoublingBackoff) {
    Ejection e;
    EXPECT_FALSE(e.on_failure(0, 3, 1, 30));
    EXPECT_FALSE(e.on_failure(0, 3, 1, 30));
    EXPECT_TRUE(e.on_failure(0, 3, 1, 30));  // third: ejected for 1 s
    EXPECT_TRUE(e.ejected(0.5));
    EXPECT_FALSE(e.ejected(1.0));
    for (int i = 0; i < 2; ++i) EXPECT_FALSE(e.on_failure(1.0, 3, 1, 30));
    EXPECT_TRUE(e.on_failure(1.0, 3, 1, 30));  // again: 2 s
    EXPECT_TRUE(e.ejected(2.9));
    EXPECT_FALSE(e.ejected(3.0));
    for (int k = 0; k < 10; ++k) {
        for (int i = 0; i < 3; ++i) e.on_failure(1000.0 * (k + 1), 3, 1, 30);
    }
    EXPECT_NEAR(e.until_s - 10000.0, 30, 1e-9);  // capped
    EXPECT_EQ(e.total, 12);
    e.on_success();
    EXPECT_FALSE(e.on_failure(20000, 3, 1, 30));  // the count restarted
    e.on_failure(20000, 3, 1, 30);
    EXPECT_TRUE(e.on_failure(20000, 3, 1, 30));
    EXPECT_NEAR(e.until_s - 20000, 1, 1e-9);  // and the backoff
}

int64_t utc(int y, int m, int d, int hh, int mm) {
    std::tm tm{};
    tm.tm_year = y - 1900;
    tm.tm_mon = m - 1;
    tm.tm_mday = d;
    tm.tm_hour = hh;
    tm.tm_min = mm;
    return int64_t(timegm(&tm));
}

TEST(Schedule, ParsesAndRejectsBadLines) {
    auto s = parse_schedule("Europe/Paris", {"19:30 prewarm night", "20:00 shift night 10%",
                                             "20:30 shift night 100%", "07:30 reverse"});
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s->entries.front().minute_of_day, 7 * 60 + 30);  // sorted
    EXPECT_EQ(s->entries[2].percent, 10);
    auto err = [](std::vector<std::string> l, const char* tz = "UTC") {
        auto r = parse_schedule(tz, l);
        return r.ok() ? std::string() : r.error().message;
    };
    EXPECT_NE(err({"25:00 reverse"}).find("not a time of day"), std::string::npos);
    EXPECT_NE(err({"7:30 reverse"}).find("HH:MM"), std::string::npos);
    EXPECT_NE(err({"07:30 launch night"}).find("unknown action 'launch'"), std::string::npos);
    EXPECT_NE(err({"07:30 shift night 10"}).find("ends with %"), std::string::npos);
    EXPECT_NE(err({"07:30 shift night 120%"}).find("0%-100%"), std::string::npos);
    EXPECT_NE(err({"07:30 shift night"}).find("expected 'HH:MM shift"), std::string::npos);
    EXPECT_NE(err({"07:30 reverse", "07:30 prewarm x"}).find("overlaps"), std::string::npos);
    EXPECT_NE(err({"07:30 reverse"}, "Mars/Olympus").find("unknown time zone"), std::string::npos);
}

TEST(Schedule, DueAcrossMidnight) {
    auto s = parse_schedule("UTC", {"23:50 shift night 10%", "00:10 shift night 100%"});
    ASSERT_TRUE(s.ok());
    const auto d = due(*s, utc(2026, 12, 3, 23, 0), utc(2026, 12, 4, 1, 0));
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(d[0].first, utc(2026, 12, 3, 23, 50));
    EXPECT_EQ(d[1].first, utc(2026, 12, 4, 0, 10));
    EXPECT_EQ(d[1].second->percent, 100);
    // Half-open: (from, to].
    EXPECT_EQ(due(*s, utc(2026, 12, 3, 23, 50), utc(2026, 12, 3, 23, 59)).size(), 0u);
    EXPECT_EQ(due(*s, utc(2026, 12, 3, 23, 49), utc(2026, 12, 3, 23, 50)).size(), 1u);
    // Two days: each entry twice.
    EXPECT_EQ(due(*s, utc(2026, 12, 1, 12, 0), utc(2026, 12, 3, 12, 0)).size(), 4u);
}

TEST(Schedule, WallClockAcrossDst) {
    // Paris: 20:00 is 19:00 UTC in winter and 18:00 UTC in summer.
    auto s = parse_schedule("Europe/Paris", {"20:00 shift night 10%"});
    ASSERT_TRUE(s.ok());
    auto at = [&](int y, int m, int d) {
        auto v = due(*s, utc(y, m, d, 0, 0), utc(y, m, d, 23, 59));
        return v.size() == 1 ? v[0].first : -1;
    };
    EXPECT_EQ(at(2026, 3, 28), utc(2026, 3, 28, 19, 0));  // the day before the change
    EXPECT_EQ(at(2026, 3, 29), utc(2026, 3, 29, 18, 0));  // the day of the change
    EXPECT_EQ(at(2026, 10, 25), utc(2026, 10, 25, 19, 0));
    // 02:30 does not exist on 29 March 2026 in Paris: it fires at 03:30 local (01:30 UTC).
    auto gap = parse_schedule("Europe/Paris", {"02:30 reverse"});
    auto g = due(*gap, utc(2026, 3, 29, 0, 0), utc(2026, 3, 29, 12, 0));
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0].first, utc(2026, 3, 29, 1, 30));
    // 02:30 happens twice on 25 October 2026: it fires once, at the first (00:30 UTC).
    auto twice = due(*gap, utc(2026, 10, 24, 22, 0), utc(2026, 10, 25, 12, 0));
    ASSERT_EQ(twice.size(), 1u);
    EXPECT_EQ(twice[0].first, utc(2026, 10, 25, 0, 30));
    // New York's change is on another date (8 March 2026).
    auto ny = parse_schedule("America/New_York", {"19:30 prewarm night"});
    auto n = due(*ny, utc(2026, 3, 8, 12, 0), utc(2026, 3, 9, 12, 0));
    ASSERT_EQ(n.size(), 1u);
    EXPECT_EQ(n[0].first, utc(2026, 3, 8, 23, 30));  // EDT, UTC-4
}

std::vector<ArmSample> arm(int n, double ttft, double e2e, uint32_t seed, bool long_prompt = false,
                           double spread = 0.1) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<double> u(1 - spread, 1 + spread);
    std::vector<ArmSample> out;
    for (int i = 0; i < n; ++i) {
        out.push_back({double(i), ttft * u(g), e2e * u(g), long_prompt, true});
    }
    return out;
}

TEST(Breaker, PausesAboveThresholdRollsBackWhenItStays) {
    BreakerPolicy p;  // +20%, 20 samples, 2 windows
    const auto src = arm(100, 0.1, 1.0, 1);
    // Equal arms: within.
    EXPECT_EQ(compare_window(src, arm(30, 0.1, 1.0, 2), p).verdict, WindowVerdict::kWithin);
    // Too few target samples: no decision.
    EXPECT_EQ(compare_window(src, arm(10, 0.5, 5.0, 3), p).verdict, WindowVerdict::kNoData);
    // e2e 30% slower.
    const WindowResult slow = compare_window(src, arm(30, 0.1, 1.3, 4), p);
    EXPECT_EQ(slow.verdict, WindowVerdict::kAbove);
    EXPECT_EQ(slow.worst, "e2e/short");
    EXPECT_GT(slow.worst_ratio, 1.2);
    // 15% slower is within +20%.
    EXPECT_EQ(compare_window(src, arm(30, 0.1, 1.15, 5, false, 0.02), p).verdict,
              WindowVerdict::kWithin);
    // Only the long class is slower: still above.
    auto src2 = src;
    auto l = arm(40, 0.4, 4, 6, true);
    src2.insert(src2.end(), l.begin(), l.end());
    auto tgt2 = arm(30, 0.1, 1.0, 7);
    auto l2 = arm(30, 0.8, 4, 8, true);
    tgt2.insert(tgt2.end(), l2.begin(), l2.end());
    EXPECT_EQ(compare_window(src2, tgt2, p).worst, "ttft/long");

    Breaker b(p);
    WindowResult within, above, none;
    within.verdict = WindowVerdict::kWithin;
    above.verdict = WindowVerdict::kAbove;
    EXPECT_EQ(b.feed(within), BreakerAction::kNone);
    EXPECT_EQ(b.feed(above), BreakerAction::kPause);
    EXPECT_EQ(b.feed(none), BreakerAction::kNone);  // no data keeps the state
    EXPECT_EQ(b.feed(within), BreakerAction::kResume);
    EXPECT_EQ(b.feed(above), BreakerAction::kPause);
    EXPECT_EQ(b.feed(above), BreakerAction::kRollback);
    BreakerPolicy three = p;
    three.rollback_windows = 3;
    Breaker c(three);
    EXPECT_EQ(c.feed(above), BreakerAction::kPause);
    EXPECT_EQ(c.feed(above), BreakerAction::kNone);
    EXPECT_EQ(c.feed(above), BreakerAction::kRollback);
}

TEST(Canary, Verdicts) {
    CanaryPolicy p;  // 10%, alpha 0.05, 50 samples
    const auto base = arm(500, 0.1, 1.0, 11);
    EXPECT_EQ(judge_canary(base, arm(20, 0.1, 1.0, 12), p).verdict, "wait");
    const CanaryVerdict slow = judge_canary(base, arm(60, 0.13, 1.3, 13), p);
    EXPECT_EQ(slow.verdict, "rollback");
    EXPECT_NE(slow.reason.find("p50"), std::string::npos);
    EXPECT_LT(slow.evidence["e2e"]["mann_whitney_p"].get<double>(), 0.05);
    EXPECT_NEAR(slow.evidence["e2e"]["ratio"].get<double>(), 1.3, 0.06);
    const CanaryVerdict equal = judge_canary(base, arm(60, 0.1, 1.0, 14), p);
    EXPECT_EQ(equal.verdict, "promote") << equal.reason;
    // Errors: 5 of 60 failed, none in the baseline.
    auto failing = arm(60, 0.1, 1.0, 15);
    for (int i = 0; i < 5; ++i) failing[size_t(i)].ok = false;
    EXPECT_EQ(judge_canary(base, failing, p).verdict, "rollback");
    // Slower beyond the tolerance but noisy: wait, then roll back at max_samples.
    CanaryPolicy small = p;
    small.max_samples = 80;
    auto noisy_base = arm(60, 0.1, 1.0, 16, false, 0.9);
    EXPECT_EQ(judge_canary(noisy_base, arm(60, 0.1, 1.12, 17, false, 0.9), p).verdict, "wait");
    EXPECT_EQ(judge_canary(noisy_base, arm(80, 0.1, 1.12, 17, false, 0.9), small).verdict,
              "rollback");
}

TEST(Quantile, InterpolatesLikeNumpy) {
    EXPECT_DOUBLE_EQ(quantile({1, 2, 3, 4}, 0.5), 2.5);
    EXPECT_DOUBLE_EQ(quantile({1, 2, 3, 4, 5}, 0.99), 4.96);
    EXPECT_TRUE(std::isnan(quantile({}, 0.5)));
}

std::string config_error(const std::string& text) {
    const std::string path = testing::TempDir() + "/router_test.toml";
    std::ofstream(path) << text;
    auto r = load_router_file(path);
    return r.ok() ? std::string() : r.error().message;
}

TEST(Config, ReadsPoolsAndRejectsBadFiles) {
    const std::string good = R"([router]
port = 9001
max_retries = 1
[[router.pools]]
name = "day"
role = "primary"
backends = ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]
weight = 90
[[router.pools]]
name = "night"
backends = ["http://127.0.0.1:8003"]
weight = 10
[[router.pools]]
name = "dr"
role = "dr"
dns = "http://pagoda-dr.default.svc:8000"
)";
    EXPECT_EQ(config_error(good), "");
    const std::string path = testing::TempDir() + "/router_test.toml";
    auto c = load_router_file(path);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->port, 9001);
    EXPECT_EQ(c->pools.size(), 3u);
    EXPECT_EQ(c->pools[2].role, PoolRole::kDr);
    EXPECT_NE(config_error("[router]\nprot = 1\n").find(":2:router.prot: unknown key"),
              std::string::npos);
    EXPECT_NE(config_error("[router]\n[[router.pools]]\nname = \"a\"\n").find("no backends"),
              std::string::npos);
    EXPECT_NE(config_error("[router]\n[[router.pools]]\nname = \"a\"\nrole = \"backup\"\n"
                           "backends = [\"http://x:1\"]\n")
                  .find("not one of primary, standby, dr"),
              std::string::npos);
    EXPECT_NE(config_error("[router]\n[[router.pools]]\nname = \"a\"\nbackends = [\"http://x:1\"]\n"
                           "weight = 60\n[[router.pools]]\nname = \"b\"\n"
                           "backends = [\"http://x:2\"]\nweight = 30\n")
                  .find("add up to 90, not 100"),
              std::string::npos);
    EXPECT_NE(config_error("[router]\n[[router.pools]]\nname = \"a\"\nrole = \"standby\"\n"
                           "backends = [\"http://x:1\"]\n")
                  .find("no primary pool"),
              std::string::npos);
    EXPECT_NE(config_error("[router]\n[[router.pools]]\nname = \"a\"\n"
                           "backends = [\"https://x:1\"]\n")
                  .find("https"),
              std::string::npos);
    EXPECT_NE(config_error("[router\n").find("router_test.toml:1"), std::string::npos);
}

TEST(Sse, SplitsEventsFedInPieces) {
    const std::string body =
        "data: {\"a\":1}\n\n: comment\n\ndata: {\"b\":\r\ndata: 2}\r\n\r\nevent: x\ndata: "
        "[DONE]\n\n";
    for (size_t piece = 1; piece <= body.size(); ++piece) {
        SseSplitter s;
        std::vector<std::string> got;
        for (size_t i = 0; i < body.size(); i += piece) {
            s.feed(std::string_view(body).substr(i, piece));
            while (auto e = s.next()) got.push_back(*e);
        }
        ASSERT_EQ(got.size(), 3u) << "piece " << piece;
        EXPECT_EQ(got[0], "{\"a\":1}");
        EXPECT_EQ(got[1], "{\"b\":\n2}");
        EXPECT_EQ(got[2], "[DONE]");
    }
}

}  // namespace
}  // namespace pagoda::router
