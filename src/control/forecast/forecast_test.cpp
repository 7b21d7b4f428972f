// Forecasters on synthetic series with known answers (a pure daily sine, a step, noise),
// and the backtest's choice on each.
#include "control/forecast/forecast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "control/forecast/forecast_tier.h"

namespace pagoda::control {
namespace {

constexpr int kDay = 1440;

RateSeries daily_sine(int days, double base, double amp) {
    RateSeries s;
    for (int t = 0; t < days * kDay; ++t) {
        s.push_back(base + amp * std::sin(2 * M_PI * t / kDay));
    }
    return s;
}

TEST(Forecast, SeasonalNaiveRepeatsYesterday) {
    const RateSeries s = daily_sine(2, 10, 5);
    auto f = seasonal_naive(kDay)->forecast(s, 30);
    ASSERT_TRUE(f.ok());
    for (int i = 0; i < 30; ++i)
        EXPECT_NEAR((*f)[size_t(i)], 10 + 5 * std::sin(2 * M_PI * i / kDay), 1e-9);
    EXPECT_FALSE(seasonal_naive(kDay)->forecast(RateSeries(100, 1.0), 30).ok());
}

TEST(Forecast, HoltWintersFollowsADailySineAndAStep) {
    const RateSeries s = daily_sine(3, 20, 8);
    auto f = holt_winters(kDay)->forecast(s, 60);
    ASSERT_TRUE(f.ok()) << f.error().message;
    for (int i = 0; i < 60; ++i) {
        EXPECT_NEAR((*f)[size_t(i)], 20 + 8 * std::sin(2 * M_PI * (i + 1) / kDay), 0.5) << i;
    }
    // A level that stepped from 5 to 15 a few hours ago (no season): the forecast follows
    // the new level, where yesterday's value would say 5.
    RateSeries step(3 * kDay, 5.0);
    for (size_t t = step.size() - 300; t < step.size(); ++t) step[t] = 15.0;
    auto g = holt_winters(kDay)->forecast(step, 30);
    ASSERT_TRUE(g.ok());
    EXPECT_NEAR((*g)[0], 15.0, 1.5);
}

TEST(Forecast, BacktestPicksTheRightModel) {
    const auto naive = seasonal_naive(kDay), hw = holt_winters(kDay);
    const std::vector<const Forecaster*> models = {naive.get(), hw.get()};
    // A pure daily sine: both are exact (Holt-Winters' first season captures it whole).
    auto r = backtest(models, daily_sine(4, 10, 5), 30, 4, 60);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_LT(r[0].mae, 1e-9);
    EXPECT_LT(r[1].mae, 1e-9);
    EXPECT_EQ(r[0].windows, 4);
    // A recent step: Holt-Winters adapts, yesterday does not.
    RateSeries step(4 * kDay, 5.0);
    for (size_t t = step.size() - 600; t < step.size(); ++t) step[t] = 15.0;
    r = backtest(models, step, 30, 4, 60);
    EXPECT_EQ(r[0].name, "holt_winters_1440m");
    // Noise around a daily sine: smoothing beats repeating yesterday's noise.
    std::mt19937 rng(7);
    std::normal_distribution<double> noise(0, 2);
    RateSeries noisy = daily_sine(4, 30, 10);
    for (double& v : noisy) v += noise(rng);
    r = backtest(models, noisy, 30, 4, 60);
    EXPECT_EQ(r[0].name, "holt_winters_1440m");
    EXPECT_GT(r[1].mae, r[0].mae);
    // Too little history: the model that cannot forecast goes last, with its reason.
    r = backtest(models, daily_sine(1, 10, 5), 30, 2, 60);
    EXPECT_EQ(r.back().windows, 0);
    EXPECT_NE(r.back().error.find("needs"), std::string::npos);
}

TEST(Forecast, LstmTrainingReducesLossAndIsDeterministic) {
    const RateSeries s = daily_sine(3, 10, 5);
    LstmOptions o;
    LstmTrainReport rep;
    auto a = train_lstm(s, o, &rep);
    ASSERT_TRUE(a.ok()) << a.error().message;
    EXPECT_EQ(rep.iterations, o.iterations);
    EXPECT_LT(rep.last_loss, rep.first_loss / 4) << rep.first_loss << " -> " << rep.last_loss;
    auto b = train_lstm(s, o);
    ASSERT_TRUE(b.ok());
    auto fa = (*a)->forecast(s, 30), fb = (*b)->forecast(s, 30);
    ASSERT_TRUE(fa.ok() && fb.ok());
    EXPECT_EQ(*fa, *fb);  // same history, same seed: the same weights, bit for bit
    double mae = 0;
    for (int i = 0; i < 30; ++i) {
        mae += std::abs((*fa)[size_t(i)] - (10 + 5 * std::sin(2 * M_PI * i / kDay))) / 30;
    }
    EXPECT_LT(mae, 1.0);  // within a fifth of the amplitude
    o.seed = 2;
    auto c = train_lstm(s, o);
    ASSERT_TRUE(c.ok());
    EXPECT_NE(*(*c)->forecast(s, 30), *fa);
    EXPECT_FALSE(train_lstm(RateSeries(10, 1.0), LstmOptions{}).ok());
}

// A state database in a fresh directory, with `minutes` of history: 3 requests a minute at
// night, 60 from 08:00 to 18:00, starting at minute `first` (a multiple of 1440).
std::unique_ptr<StateDb> db_with_history(const std::string& name, int64_t first, int64_t minutes) {
    const std::string dir = ::testing::TempDir() + "/forecast_" + name;
    std::filesystem::remove_all(dir);
    auto db = StateDb::open(dir);
    EXPECT_TRUE(db.ok());
    std::vector<RateMinute> rows;
    for (int64_t m = first; m < first + minutes; ++m) {
        const int64_t hour = (m % kDay) / 60;
        rows.push_back({m, hour >= 8 && hour < 18 ? 60 : 3, 0, 0, 0});
    }
    if (!rows.empty()) {
        EXPECT_TRUE((*db)->put_rate_minutes(rows).ok());
    }
    return std::move(db).value();
}

constexpr int64_t kFirst = 29'923'200;  // 2026-11-23 00:00 UTC, in minutes
constexpr int64_t kMinMs = 60'000;

TEST(ForecastTier, PrewarmsAheadOfTheMorningRise) {
    auto db = db_with_history("rise", kFirst, 3 * kDay + 7 * 60 + 40);  // to day 4, 07:40
    ForecastOptions o;
    o.clock_start_ms = (kFirst + 3 * kDay + 7 * 60 + 40) * kMinMs;  // day 4, 07:40
    const int64_t t0 = 1'000'000;
    auto tier = ForecastTier::open(*db, o, t0);
    ASSERT_TRUE(tier.ok()) << tier.error().message;
    (*tier)->wait_idle();
    EXPECT_EQ((*tier)->prewarm().level, WarmLevel::kOff);  // the rise is 20 minutes away
    (*tier)->observe(*db, t0, 0, 0, {});
    (*tier)->observe(*db, t0 + 10 * kMinMs, 0, 0, {});  // 07:50: the rise is 10 minutes away
    (*tier)->wait_idle();
    const Prewarm p = (*tier)->prewarm();
    EXPECT_NE(p.level, WarmLevel::kOff);
    EXPECT_GE(p.lead_minutes, 5);
    EXPECT_LE(p.lead_minutes, 12);
    EXPECT_GT(p.predicted_rps, p.threshold_rps);
    const auto r = (*tier)->report(t0 + 10 * kMinMs);
    EXPECT_EQ(r["mode"], "predictive");
    EXPECT_FALSE(r["model"].is_null());
    EXPECT_EQ(r["forecast"].size(), 30u);
    EXPECT_NE((*tier)->metrics_text("m").find("pagoda_forecast_requests_per_second{"),
              std::string::npos);
}

TEST(ForecastTier, ReactiveOnlyWithoutHistoryAndCorruptHistoryRefused) {
    auto db = db_with_history("empty", kFirst, 0);
    auto tier = ForecastTier::open(*db, ForecastOptions{}, 1'000'000);
    ASSERT_TRUE(tier.ok());
    (*tier)->wait_idle();
    EXPECT_EQ((*tier)->report(1'000'000)["model"], nullptr);
    EXPECT_EQ((*tier)->prewarm().level, WarmLevel::kOff);
    auto bad = db_with_history("corrupt", kFirst, kDay);
    ASSERT_TRUE(bad->put_rate_minutes({{kFirst + 5, -1, 0, 0, 0}}).ok());
    ForecastOptions o;
    o.clock_start_ms = (kFirst + kDay) * kMinMs;
    auto t = ForecastTier::open(*bad, o, 1'000'000);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.error().message.find("negative count"), std::string::npos);
    o.rise_factor = 1.0;
    EXPECT_FALSE(ForecastTier::open(*db, o, 1'000'000).ok());
}

TEST(ForecastTier, ArrivalsSpreadOverTheMinutesATickSpans) {
    auto db = db_with_history("spread", kFirst, 0);
    ForecastOptions o;
    o.clock_scale = 120;  // a minute lasts half a second
    o.clock_start_ms = kFirst * kMinMs;
    auto tier = ForecastTier::open(*db, o, 0);
    ASSERT_TRUE(tier.ok());
    (*tier)->observe(*db, 0, 1000, 0, {});
    (*tier)->observe(*db, 1000, 1120, 0, {});  // two minutes later, 120 arrivals
    (*tier)->observe(*db, 1600, 1120, 0, {});
    auto rows = db->rate_minutes(kFirst, kFirst + 10);
    ASSERT_TRUE(rows.ok());
    ASSERT_EQ(rows->size(), 3u);
    EXPECT_EQ((*rows)[0].requests, 60);
    EXPECT_EQ((*rows)[1].requests, 60);
    EXPECT_EQ((*rows)[2].requests, 0);
}

}  // namespace
}  // namespace pagoda::control
