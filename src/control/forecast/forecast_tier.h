#pragma once
// ForecastTier: the predictive warmup tier. It keeps the replica's request-rate history per
// minute (arrivals, by length class, and the deepest waiting queue), persisted in the state
// database's rate_history table; a worker thread forecasts the next `horizon` minutes after
// every closed minute and, every `refit_minutes`, runs a rolling backtest of the
// forecasters (seasonal naive on yesterday and on last week, Holt-Winters with a daily
// season, an LSTM trained on the history) and keeps the one with the lowest error; when a
// model fails the next one in the ranking forecasts, and with none the tier is reactive
// only (both logged). From the forecast it derives a pre-warm: when the predicted rate
// within `lead_minutes` rises `rise_factor` above the current one, the level is low at 15
// minutes ahead, medium at 10, high at 5 (progressive), and a recommended replica count.
//
// Time is the forecast clock: real time by default; with clock_scale K a minute lasts
// 60/K real seconds from clock_start_ms (a compressed clock, for trace replays and tests).
// Thread-safe; the owner calls observe() from one thread (the control tick).

#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "control/config/state_db.h"
#include "control/forecast/forecast.h"
#include "control/warm/warm_policy.h"

namespace pagoda::control {

struct ForecastOptions {
    bool enabled = true;         // --no-forecast: reactive warmup only
    double clock_scale = 1;      // --forecast-clock-scale
    int64_t clock_start_ms = 0;  // --forecast-clock-start (0: the real time at start)
    int horizon = 30;            // minutes forecast
    int lead_minutes = 15;       // --prewarm-lead: pre-warm this far ahead of a rise
    double rise_factor = 1.5;    // --prewarm-rise: predicted / current rate that is a rise
    int refit_minutes = 60;      // backtest and retrain every this many minutes
    int backtest_folds = 6;      // rolling origins, `backtest_step` minutes apart
    int backtest_step = 30;
    double replica_capacity_rps = 0;  // --replica-capacity-rps (0: learnt from the history)
    int64_t length_boundary = 1024;   // short / long requests (prompt + output tokens)
    int history_days = 28;            // kept in memory and loaded at start
    LstmOptions lstm;
    Status validate() const;
};

// What the tier asks of the warm policy now.
struct Prewarm {
    WarmLevel level = WarmLevel::kOff;
    double lead_minutes = 0;  // until the predicted rise
    double threshold_rps = 0, current_rps = 0, predicted_rps = 0;
};

// One refit: the classic forecasters and an LSTM trained on the history before the first
// backtest origin (so its backtest is out of sample), ranked by the rolling backtest.
struct FitResult {
    std::vector<BacktestResult> ranking;
    std::vector<std::unique_ptr<Forecaster>> models;
    LstmTrainReport lstm;
    double seconds = 0;
};
FitResult fit_models(const RateSeries& s, const ForecastOptions& o);

// Replicas for `peak_rps` at `capacity_rps` each, at least 1 (1 when the capacity is unknown).
int64_t recommended_replicas(double peak_rps, double capacity_rps);

class ForecastTier {
  public:
    // Loads the stored history (the last history_days before the clock's now). Errors: a
    // corrupt history, bad options.
    static Result<std::unique_ptr<ForecastTier>> open(StateDb& db, const ForecastOptions& o,
                                                      int64_t now_ms);
    ~ForecastTier();  // stops the worker

    // One control tick: arrivals so far (a counter), the waiting queue, and the lengths of
    // requests finished since the last call. Closed minutes are written to `db`.
    void observe(StateDb& db, int64_t now_ms, int64_t submitted_total, int64_t waiting,
                 const std::vector<int32_t>& finished_lengths);
    Prewarm prewarm() const;
    int64_t clock_ms(int64_t now_ms) const;       // the forecast clock
    nlohmann::json report(int64_t now_ms) const;  // GET /admin/forecast
    std::string metrics_text(const std::string& model_name) const;
    void wait_idle();  // until the worker has nothing queued (tests)

  private:
    ForecastTier(const ForecastOptions& o, int64_t now_ms);
    // Closes the open minute and the ones `between` it and `minute` (their arrivals).
    void close_minutes(StateDb& db, int64_t minute, const std::vector<double>& between);
    void worker();
    void fit(const RateSeries& s, int64_t minute);  // without the lock
    void update_prewarm_locked();
    double peak_ahead_locked() const;    // the predicted peak within the lead; mu_ held
    double capacity_rps_locked() const;  // one replica's capacity; mu_ held

    ForecastOptions o_;
    int64_t start_real_ms_, start_clock_ms_;
    mutable std::mutex mu_;
    std::condition_variable cv_, idle_cv_;
    // Guarded by mu_:
    RateSeries series_;            // rps per minute, contiguous
    int64_t series_end_ = 0;       // the minute after the last in series_
    RateMinute open_{};            // the minute being counted
    double open_requests_ = 0;     // its arrivals (a share of a tick's when ticks span minutes)
    int64_t last_clock_ms_ = 0;    // the forecast clock at the last observation
    int64_t last_submitted_ = -1;  // -1: not seen yet
    bool clock_back_logged_ = false;
    bool pending_ = false, busy_ = false, stop_ = false;
    int64_t last_fit_minute_ = INT64_MIN / 2;
    std::vector<BacktestResult> ranking_;
    std::vector<std::unique_ptr<Forecaster>> models_;  // by name, from the last fit
    std::string chosen_, fallback_reason_;
    std::vector<double> forecast_;  // from series_end_ on
    int64_t forecast_from_ = 0;
    LstmTrainReport lstm_report_;
    double fit_seconds_ = 0;
    double peak_comfortable_rps_ = 0;  // the highest minute rate with a shallow queue
    Prewarm prewarm_;
    std::thread thread_;
};

}  // namespace pagoda::control
