#pragma once
// Request-rate forecasting for predictive warmup (issue 15): forecasters over a series of
// per-minute request rates, and a rolling backtest that picks the one with the lowest
// error. Seasonal naive (the same minute yesterday, or last week), Holt-Winters with
// additive daily seasonality (alpha, beta, gamma fitted by grid search on the history).
// Pure functions and values: thread-safe.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"

namespace pagoda::control {

// Rates in requests per second, one per minute, oldest first.
using RateSeries = std::vector<double>;

class Forecaster {
  public:
    virtual ~Forecaster() = default;
    virtual std::string name() const = 0;
    // Predicts the `horizon` minutes after `history`. Errors: too little history.
    virtual Result<std::vector<double>> forecast(const RateSeries& history, int horizon) const = 0;
};

// The value `season` minutes before each predicted minute (1440: yesterday, 10080: last week).
std::unique_ptr<Forecaster> seasonal_naive(int season);
// Additive Holt-Winters with a season of `season` minutes; needs two seasons of history.
std::unique_ptr<Forecaster> holt_winters(int season);

// A small LSTM (forecast_lstm.cpp) trained in process on the history: inputs are the
// minute's rate (scaled by the history's peak) and the phase of the day and of the week;
// it predicts the next minute and rolls forward for longer horizons. Training is seeded and
// single-threaded, so the same history and seed give the same weights.
struct LstmOptions {
    int hidden = 12;       // LSTM cells
    int window = 64;       // minutes per training sequence (truncated BPTT)
    int batch = 16;        // sequences per update
    int iterations = 300;  // Adam updates
    double learning_rate = 0.01;
    int context = 240;  // minutes of history run through before a forecast
    uint64_t seed = 1;
};
struct LstmTrainReport {
    double first_loss = 0;  // mean squared error (scaled) of the first 10 updates
    double last_loss = 0;   // of the last 10
    int iterations = 0;
    double seconds = 0;
};
// Errors: too little history (window + 2 minutes), a loss that is not finite (diverged).
Result<std::unique_ptr<Forecaster>> train_lstm(const RateSeries& history, const LstmOptions& o,
                                               LstmTrainReport* report = nullptr);

struct BacktestResult {
    std::string name;
    double mae = 0;   // mean absolute error over the backtest windows, requests/s
    int windows = 0;  // 0: it could not forecast (too little history)
    std::string error;
};

// Rolling-origin backtest: from `folds` origins spaced `step` minutes apart at the end of
// the series, forecast `horizon` minutes and compare. Sorted best first: the models that
// forecast from every origin by error, then those that could only from some (their error is
// over fewer, later windows, so it does not compare), then the failed.
std::vector<BacktestResult> backtest(const std::vector<const Forecaster*>& models,
                                     const RateSeries& series, int horizon, int folds, int step);

}  // namespace pagoda::control
