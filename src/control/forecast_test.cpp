// Forecasters on synthetic series with known answers (a pure daily sine, a step, noise),
// and the backtest's choice on each.
#include "control/forecast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

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

}  // namespace
}  // namespace pagoda::control
