// Block-size policies, context-length statistics and the OOM guard as pure logic: the
// seed heuristic against hand-computed values, the measured policy on synthetic
// distributions and calibrations, and guard decisions from synthetic signal series.
#include <gtest/gtest.h>

#include <cmath>

#include "control/policy/block_size_policy.h"
#include "control/policy/length_stats.h"
#include "control/policy/oom_guard.h"

namespace pagoda::control {
namespace {

// ---- seed ------------------------------------------------------------------------------

struct SeedRow {
    double ctx, avg, predicted;
    int raw, block;
};

TEST(SeedPolicy, MatchesHandComputedTable) {
    const SeedParams p;
    // predicted = h*ctx + (1-h)*avg, h = 0.7 up to 8000 tokens, 0.3 above;
    // raw = clamp(int(predicted * 0.15), 8, 64); block = nearest supported, ties up.
    const SeedRow rows[] = {
        {100, 100, 100, 15, 16},       // 15.0 -> 16
        {40, 40, 40, 8, 8},            // 6 -> lower bound 8
        {200, 100, 170, 25, 32},       // 25.5 -> 25: 7 from 32, 9 from 16
        {160, 160, 160, 24, 32},       // 24: a tie between 16 and 32 goes up
        {300, 200, 270, 40, 48},       // 40.5 -> 40: a tie between 32 and 48 goes up
        {360, 360, 360, 54, 48},       // 54: 6 from 48, 10 from 64
        {380, 380, 380, 57, 64},       // 57 -> 64: rounding saturates from 373 tokens
        {500, 500, 500, 64, 64},       // 75 -> upper bound 64
        {8000, 1000, 5900, 64, 64},    // 8000 is not above 8000: h = 0.7
        {8001, 1000, 3100.3, 64, 64},  // above 8000: h = 0.3
    };
    for (const SeedRow& r : rows) {
        EXPECT_NEAR(seed_predicted(r.ctx, r.avg, p), r.predicted, 1e-9) << r.ctx;
        EXPECT_EQ(seed_raw_block(r.predicted, p), r.raw) << r.ctx;
        EXPECT_EQ(round_to_supported(r.raw, p.min_block, p.max_block), r.block) << r.ctx;
    }
    // The 8000-token switch on its own: the weight of ctx drops from 0.7 to 0.3.
    EXPECT_DOUBLE_EQ(seed_predicted(8000, 0, p), 5600);
    EXPECT_DOUBLE_EQ(seed_predicted(8001, 0, p), 0.3 * 8001);
    // Saturation: raw 64 from predicted 426.67 (64 / 0.15) up.
    EXPECT_EQ(seed_raw_block(426.0, p), 63);
    EXPECT_EQ(seed_raw_block(427.0, p), 64);
    EXPECT_EQ(seed_raw_block(1e9, p), 64);
}

TEST(SeedPolicy, MixedWorkloadWeightsShortAndLong) {
    const SeedParams p;
    LengthHistogram mixed;
    for (int i = 0; i < 50; ++i) mixed.add(100);
    for (int i = 0; i < 50; ++i) mixed.add(10000);
    const double avg = mixed.mean();  // 5050
    const SeedDecision d = seed_decide(mixed, 400, avg, p);
    EXPECT_TRUE(d.mixed);
    // 0.4 * (0.7*100 + 0.3*5050) + 0.6 * (0.3*10000 + 0.7*5050) = 0.4*1585 + 0.6*6535
    EXPECT_NEAR(d.predicted, 4555, 1e-6);
    EXPECT_EQ(d.block, 64);
    // 5% long is not a mixed workload: ctx and avg_ctx decide.
    LengthHistogram mostly_short;
    for (int i = 0; i < 95; ++i) mostly_short.add(100);
    for (int i = 0; i < 5; ++i) mostly_short.add(10000);
    const SeedDecision s = seed_decide(mostly_short, 100, 100, p);
    EXPECT_FALSE(s.mixed);
    EXPECT_NEAR(s.predicted, 100, 1e-9);
    EXPECT_EQ(s.block, 16);
    // No data: the base size.
    EXPECT_EQ(seed_decide(LengthHistogram(), 0, 0, p).block, 16);
}

TEST(SeedPolicy, RecalibrationMapsThePredictionOntoTheMeasuredBest) {
    EXPECT_DOUBLE_EQ(refit_scaling(200, 32), 0.16);
    EXPECT_DOUBLE_EQ(refit_scaling(1e9, 8), 0.001);
    EXPECT_DOUBLE_EQ(refit_scaling(0, 8), 0.15);
}

// ---- length statistics -----------------------------------------------------------------

TEST(LengthStats, BucketsQuantilesAndRoundTrip) {
    EXPECT_EQ(LengthHistogram::bucket_of(0), 0);
    EXPECT_EQ(LengthHistogram::bucket_of(7), 0);
    EXPECT_EQ(LengthHistogram::bucket_of(8), 1);
    EXPECT_EQ(LengthHistogram::bucket_upper(1), 9);
    for (int64_t len : {8, 9, 10, 100, 1000, 4095, 4096, 100000}) {
        const int b = LengthHistogram::bucket_of(len);
        EXPECT_LE(len, LengthHistogram::bucket_upper(b)) << len;
        EXPECT_GT(len, LengthHistogram::bucket_upper(b - 1)) << len;
    }
    EXPECT_EQ(LengthHistogram::bucket_of(int64_t(1) << 30), LengthHistogram::kBuckets - 1);
    ContextLengthStats s;
    for (int i = 1; i <= 1000; ++i) s.add(i, int64_t(i % 24) * 3'600'000);
    EXPECT_EQ(s.all().count(), 1000);
    EXPECT_NEAR(s.all().mean(), 500.5, 1e-9);
    const int64_t p50 = s.all().quantile(0.5);
    EXPECT_GE(p50, 500);
    EXPECT_LE(p50, 600);
    EXPECT_GT(s.ema(), 900) << "recent lengths weigh most";
    auto back = ContextLengthStats::from_json(nlohmann::json::parse(s.to_json().dump()));
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(*back, s);
    EXPECT_FALSE(ContextLengthStats::from_json({{"all", 3}}).ok());
    EXPECT_FALSE(LengthHistogram::from_json({{"buckets", {{"999", {1, 2}}}}}).ok());
    EXPECT_FALSE(LengthHistogram::from_json({{"buckets", {{"3", {-1, 2}}}}}).ok());
}

// ---- measured --------------------------------------------------------------------------

// A calibration with 1 ns per cached token and 4 ns per block gathered, per sequence-step.
Calibration synthetic_calibration() {
    Calibration c;
    c.key = "synthetic";
    c.lengths = {16, 64, 256, 1024, 4096, 16384};
    for (int b : {8, 16, 32, 48, 64, 128}) {
        for (int64_t len : c.lengths) {
            c.seconds[b].push_back(1e-9 * double(len) + 4e-9 * std::ceil(double(len) / b));
        }
    }
    return c;
}

LengthHistogram uniform(int64_t lo, int64_t hi, int64_t step) {
    LengthHistogram h;
    for (int64_t l = lo; l <= hi; l += step) h.add(l);
    return h;
}

MeasuredInputs busy(int current) {
    MeasuredInputs in;
    in.kv_memory_bytes = int64_t(1) << 30;
    in.kv_bytes_per_token = 1024;  // a 1M-token pool
    in.concurrency = 64;
    in.kv_pressure = 0.9;
    in.current_block = current;
    return in;
}

TEST(MeasuredPolicy, ShortPicksSmallLongPicksLarge) {
    const Calibration cal = synthetic_calibration();
    const MeasuredDecision s = measured_decide(uniform(50, 200, 1), cal, busy(64));
    EXPECT_LE(s.block, 32) << s.to_json().dump(1);
    EXPECT_GT(s.gain, 0.0);
    const MeasuredDecision l = measured_decide(uniform(4000, 8000, 7), cal, busy(16));
    EXPECT_GE(l.block, 64) << l.to_json().dump(1);
    EXPECT_GT(l.gain, 0.05);
    // Already at the best size: no gain.
    EXPECT_DOUBLE_EQ(measured_decide(uniform(4000, 8000, 7), cal, busy(l.block)).gain, 0.0);
    EXPECT_EQ(measured_decide(LengthHistogram(), cal, busy(16)).block, 16) << "no data: keep";
}

TEST(MeasuredPolicy, DayAndNightWindowsPickDifferently) {
    const Calibration cal = synthetic_calibration();
    ContextLengthStats s;
    const int64_t hour = 3'600'000, day = 24 * hour;
    // A week of traffic: short chat from 08:00 to 20:00 UTC, long batch jobs at night.
    for (int d = 0; d < 7; ++d) {
        for (int h = 0; h < 24; ++h) {
            const bool daytime = h >= 8 && h < 20;
            for (int i = 0; i < 30; ++i) {
                s.add(daytime ? 60 + (i * 7) % 140 : 3000 + (i * 331) % 5000,
                      d * day + h * hour + i * 1000);
            }
        }
    }
    std::string noon_window, night_window;
    const auto& noon = s.window_for(7 * day + 12 * hour, 100, &noon_window);
    const auto& night = s.window_for(7 * day + 2 * hour, 100, &night_window);
    EXPECT_EQ(noon_window, "hour 12 UTC");
    EXPECT_EQ(night_window, "hour 2 UTC");
    const int by_day = measured_decide(noon, cal, busy(16)).block;
    const int by_night = measured_decide(night, cal, busy(16)).block;
    EXPECT_LE(by_day, 32);
    EXPECT_GE(by_night, 64);
    // Too few samples in the hour: the all-time distribution decides.
    std::string w;
    ContextLengthStats sparse;
    sparse.add(100, 0);
    EXPECT_EQ(&sparse.window_for(0, 100, &w), &sparse.all());
    EXPECT_EQ(w, "all time");
}

TEST(MeasuredPolicy, NeverPicksASizeTheBudgetCannotHold) {
    const Calibration cal = synthetic_calibration();
    const LengthHistogram lengths = uniform(4000, 4000, 1);  // 4000 tokens each
    MeasuredInputs in = busy(8);
    in.kv_bytes_per_token = 1;
    in.concurrency = 10;
    // 10 x 4000 tokens: block 8 and 16 and 32 hold exactly 4000 per sequence, 48 and 64
    // round up to 4032 and 4032, 128 to 4096. A budget of 40,100 tokens holds 10 only
    // with 8, 16 and 32.
    in.kv_memory_bytes = 40'100;
    const MeasuredDecision d = measured_decide(lengths, cal, in);
    for (const Candidate& c : d.candidates) {
        EXPECT_EQ(c.fits, c.block_size <= 32) << c.block_size;
    }
    EXPECT_EQ(d.block, 32) << d.to_json().dump(1);
    in.current_block = 64;
    const MeasuredDecision away = measured_decide(lengths, cal, in);
    EXPECT_EQ(away.block, 32);
    EXPECT_DOUBLE_EQ(away.gain, 1.0) << "the current size does not fit: move";
    in.kv_memory_bytes = 1000;
    const MeasuredDecision none = measured_decide(lengths, cal, in);
    EXPECT_EQ(none.block, 64) << "nothing fits: keep the current size";
}

TEST(MeasuredPolicy, CalibrationOnTheRealKernel) {
    CalibrationShape shape{2, 8, 4, 16, kernels::KvDtype::kF32};
    auto c = calibrate(shape, {16, 256});
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->seconds.size(), 6u);
    for (const auto& [b, t] : c->seconds) {
        ASSERT_EQ(t.size(), 2u);
        // Times only: how they compare is the machine's business (no speed in tests).
        EXPECT_GT(t[0], 0.0) << b;
        EXPECT_GT(t[1], 0.0) << b;
    }
    auto back = Calibration::from_json(c->to_json());
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->seconds, c->seconds);
    EXPECT_FALSE(calibrate({2, 7, 4, 16, kernels::KvDtype::kF32}, {16}).ok()) << "bad GQA shape";
}

// ---- OOM guard -------------------------------------------------------------------------

GuardSample sample(int64_t t_s, int64_t free, int64_t waiting, int64_t preempted, int64_t rss = 0) {
    return {t_s * 1000, free, 1000, waiting, preempted, rss};
}

TEST(OomGuard, LevelSignalsMustHoldForSustainedSamples) {
    OomGuard g(GuardOptions{});
    EXPECT_TRUE(g.observe(sample(0, 5, 3, 0)).empty());  // 0.5% free, waiting: 1 of 3
    EXPECT_TRUE(g.observe(sample(1, 5, 3, 0)).empty());
    auto s = g.observe(sample(2, 5, 3, 0));
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].name, "kv_free_blocks");
    EXPECT_TRUE(g.observe(sample(3, 5, 0, 0)).empty()) << "a full pool with no one waiting is fine";
    EXPECT_TRUE(g.observe(sample(4, 500, 9, 0)).empty());
}

TEST(OomGuard, PreemptionRateOverTheLastMinute) {
    GuardOptions o;
    o.preemptions_per_minute = 60;
    OomGuard g(o);
    EXPECT_TRUE(g.observe(sample(0, 500, 0, 0)).empty());
    EXPECT_TRUE(g.observe(sample(5, 500, 0, 30)).empty()) << "under 10 s of samples: no rate";
    auto s = g.observe(sample(20, 500, 0, 30));  // 30 in 20 s = 90 per minute
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].name, "preemption_rate");
    EXPECT_NEAR(s[0].value, 90, 1e-9);
    // A minute later with no new preemptions the window has moved on.
    EXPECT_TRUE(g.observe(sample(90, 500, 0, 30)).empty());
    EXPECT_TRUE(g.observe(sample(100, 500, 0, 35)).empty()) << "5 in 10 s = 30 per minute";
}

TEST(OomGuard, RssOverTheLimit) {
    GuardOptions o;
    o.memory_limit_bytes = 1000;
    o.sustain = 1;
    OomGuard g(o);
    EXPECT_TRUE(g.observe(sample(0, 500, 0, 0, 850)).empty());
    auto s = g.observe(sample(1, 500, 0, 0, 950));
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].name, "rss");
    EXPECT_NEAR(s[0].value, 0.95, 1e-9);
    GuardOptions no_limit;
    no_limit.sustain = 1;
    EXPECT_TRUE(OomGuard(no_limit).observe(sample(0, 500, 0, 0, int64_t(1) << 40)).empty());
}

TEST(OomGuard, RollsBackOnlyWithinTheWindowAndWithATarget) {
    GuardOptions o;
    o.window_ms = 300'000;
    const int64_t change = 1'000'000;
    EXPECT_EQ(guard_action(false, change + 1000, change, true, o), GuardAction::kNone);
    EXPECT_EQ(guard_action(true, change + 1000, change, true, o), GuardAction::kRollback);
    EXPECT_EQ(guard_action(true, change + 300'000, change, true, o), GuardAction::kRollback);
    EXPECT_EQ(guard_action(true, change + 300'001, change, true, o), GuardAction::kReport)
        << "no recent change: report only";
    EXPECT_EQ(guard_action(true, change + 1000, change, false, o), GuardAction::kReport)
        << "already at the last stable value, or none: report only";
}

}  // namespace
TEST(RelayoutEconomics, WaitsUnderLoadAndGoesAheadWhenQuiet) {
    // docs/performance.md's run: 64 live sequences of ~4k tokens, a 5% cheaper attention,
    // the TinyLlama shape's 45 KB of f32 KV a token copied at 2 GB/s.
    const double cur = 100, choice = 95;  // us per sequence and decode step
    const double copy = 45056 / kRelayoutCopyBytesPerSecond;
    RelayoutEconomics busy = relayout_economics(cur, choice, 100, 900, 64 * 4096, copy);
    EXPECT_NEAR(busy.saving_s, 5e-6 * 100 * 900, 1e-9);         // 0.45 s over the cooldown
    EXPECT_NEAR(busy.cost_s, 64.0 * 4096 * 45056 / 2e9, 1e-6);  // 5.9 s of copying
    EXPECT_LT(busy.net_s(), 0);
    // The same traffic on average, at a quiet moment: little to carry over.
    RelayoutEconomics quiet = relayout_economics(cur, choice, 100, 900, 256, copy);
    EXPECT_GT(quiet.net_s(), 0);
    // A large gain pays for the copy even under load.
    EXPECT_GT(relayout_economics(cur, 50, 2000, 900, 64 * 4096, copy).net_s(), 0);
    // Nothing in the KV: free, whatever the rate.
    EXPECT_EQ(relayout_economics(cur, choice, 0, 900, 0, copy).cost_s, 0);
    // An unknown cost per token with tokens to carry: never worth it.
    EXPECT_TRUE(std::isinf(relayout_economics(cur, choice, 100, 900, 10, INFINITY).cost_s));
    // A worse choice never saves.
    EXPECT_LT(relayout_economics(95, 100, 100, 900, 0, copy).saving_s, 0);
}

}  // namespace pagoda::control
