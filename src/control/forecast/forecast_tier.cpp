// ForecastTier: the implementation (the contract is in control/forecast/forecast_tier.h).
#include "control/forecast/forecast_tier.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "base/log.h"
#include "metrics/metrics.h"

namespace pagoda::control {

namespace {

constexpr int64_t kMinuteMs = 60'000;
constexpr int64_t kWeekMinutes = 10'080;
constexpr int kCurrentMinutes = 10;  // the current rate: the mean of the last minutes

// The forecasters the backtest compares (the LSTM is trained separately, on the history
// before the first backtest origin, so that its backtest is out of sample).
std::vector<std::unique_ptr<Forecaster>> classic_models() {
    std::vector<std::unique_ptr<Forecaster>> m;
    m.push_back(seasonal_naive(1440));
    m.push_back(seasonal_naive(int(kWeekMinutes)));
    m.push_back(holt_winters(1440));
    return m;
}

// The predicted rate `ahead` minutes after the open minute, as the mean of the 5 minutes
// around it (per-minute counts are noisy at low rates, and so are forecasts that repeat
// them); NaN past the forecast.
double predicted_at(const std::vector<double>& f, int64_t from, int64_t open, int64_t ahead) {
    const int64_t i = open + ahead - from;
    if (i < 0 || i >= int64_t(f.size())) return std::nan("");
    const int64_t lo = std::max<int64_t>(0, i - 2),
                  hi = std::min<int64_t>(int64_t(f.size()) - 1, i + 2);
    double sum = 0;
    for (int64_t k = lo; k <= hi; ++k) sum += f[size_t(k)];
    return sum / double(hi - lo + 1);
}

}  // namespace

Status ForecastOptions::validate() const {
    if (!(clock_scale > 0 && clock_scale <= 100'000)) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--forecast-clock-scale must be in (0, 100000] (got {})", clock_scale);
    }
    if (horizon < 1 || horizon > 1440 || lead_minutes < 1 || lead_minutes > horizon) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--prewarm-lead must be in [1, {}] minutes (the forecast horizon; got "
                          "{})",
                          horizon, lead_minutes);
    }
    if (!(rise_factor > 1 && rise_factor <= 100)) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--prewarm-rise must be in (1, 100] (got {}; 1.5 means a 50% rise)",
                          rise_factor);
    }
    if (!(replica_capacity_rps >= 0) || refit_minutes < 1 || backtest_folds < 1 ||
        backtest_step < 1 || history_days < 1) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--replica-capacity-rps must be >= 0 (got {})", replica_capacity_rps);
    }
    return ok_status();
}

ForecastTier::ForecastTier(const ForecastOptions& o, int64_t now_ms)
    : o_(o),
      start_real_ms_(now_ms),
      start_clock_ms_(o.clock_start_ms > 0 ? o.clock_start_ms : now_ms) {}

Result<std::unique_ptr<ForecastTier>> ForecastTier::open(StateDb& db, const ForecastOptions& o,
                                                         int64_t now_ms) {
    PAGODA_TRY(o.validate());
    std::unique_ptr<ForecastTier> t(new ForecastTier(o, now_ms));
    const int64_t minute = t->clock_ms(now_ms) / kMinuteMs;
    PAGODA_ASSIGN_OR_RETURN(std::vector<RateMinute> rows,
                            db.rate_minutes(minute - int64_t(o.history_days) * 1440, minute));
    if (!rows.empty()) {
        // Contiguous from the first stored minute, gaps (the replica was down) as zeros.
        t->series_.assign(size_t(minute - rows.front().minute), 0.0);
        for (const RateMinute& r : rows) {
            t->series_[size_t(r.minute - rows.front().minute)] = double(r.requests) / 60.0;
            if (r.max_waiting <= 5) {
                t->peak_comfortable_rps_ =
                    std::max(t->peak_comfortable_rps_, double(r.requests) / 60.0);
            }
        }
    }
    t->series_end_ = minute;
    t->open_.minute = minute;
    log_info("forecast_history loaded_minutes={} first_minute={} clock_scale={}", rows.size(),
             rows.empty() ? minute : rows.front().minute, o.clock_scale);
    t->pending_ = !t->series_.empty();
    t->thread_ = std::thread([p = t.get()] { p->worker(); });
    return t;
}

ForecastTier::~ForecastTier() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

int64_t ForecastTier::clock_ms(int64_t now_ms) const {
    return start_clock_ms_ + int64_t(double(now_ms - start_real_ms_) * o_.clock_scale);
}

void ForecastTier::observe(StateDb& db, int64_t now_ms, int64_t submitted_total, int64_t waiting,
                           const std::vector<int32_t>& finished_lengths) {
    const int64_t c = clock_ms(now_ms);
    const int64_t minute = c / kMinuteMs;
    std::unique_lock<std::mutex> lock(mu_);
    const double arrived =
        last_submitted_ < 0 ? 0.0 : double(std::max<int64_t>(0, submitted_total - last_submitted_));
    last_submitted_ = submitted_total;
    open_.max_waiting = std::max(open_.max_waiting, waiting);
    for (int32_t len : finished_lengths) {
        (len <= o_.length_boundary ? open_.short_requests : open_.long_requests) += 1;
    }
    if (minute < open_.minute) {
        open_requests_ += arrived;
        if (!clock_back_logged_) {
            log_warn(
                "forecast_clock_jumped_back by_minutes={}; counting into minute {} until "
                "the clock catches up",
                open_.minute - minute, open_.minute);
            clock_back_logged_ = true;
        }
        return;
    }
    clock_back_logged_ = false;
    // The arrivals since the last tick, spread over the minutes that tick spans in
    // proportion to time (a fast forecast clock closes several minutes per tick).
    const int64_t from = std::max(last_clock_ms_, open_.minute * kMinuteMs);
    last_clock_ms_ = c;
    const double span = double(std::max<int64_t>(1, c - from));
    auto share = [&](int64_t m) {
        const int64_t lo = std::max(from, m * kMinuteMs), hi = std::min(c, (m + 1) * kMinuteMs);
        return hi > lo ? arrived * double(hi - lo) / span : 0.0;
    };
    if (minute == open_.minute || c <= from) {
        open_requests_ += arrived;
        return;
    }
    open_requests_ += share(open_.minute);
    std::vector<double> between;
    for (int64_t m = open_.minute + 1; m < minute && m - open_.minute <= kWeekMinutes; ++m) {
        between.push_back(share(m));
    }
    close_minutes(db, minute, between);
    open_requests_ = share(minute);
    pending_ = true;
    lock.unlock();
    cv_.notify_all();
}

void ForecastTier::close_minutes(StateDb& db, int64_t minute, const std::vector<double>& between) {
    open_.requests = std::llround(open_requests_);
    std::vector<RateMinute> rows = {open_};
    if (minute - open_.minute > kWeekMinutes) {
        // A jump of more than a week: the history before it no longer lines up.
        log_warn("forecast_clock_jumped_ahead by_minutes={}; the history restarts",
                 minute - open_.minute);
        series_.clear();
    } else {
        series_.push_back(open_requests_ / 60.0);
        for (size_t i = 0; i < between.size(); ++i) {
            rows.push_back(
                RateMinute{open_.minute + 1 + int64_t(i), std::llround(between[i]), 0, 0, 0});
            series_.push_back(between[i] / 60.0);
        }
    }
    if (open_.max_waiting <= 5) {
        peak_comfortable_rps_ = std::max(peak_comfortable_rps_, open_requests_ / 60.0);
    }
    const size_t keep = size_t(o_.history_days) * 1440;
    if (series_.size() > keep) series_.erase(series_.begin(), series_.end() - int64_t(keep));
    series_end_ = minute;
    open_ = RateMinute{minute, 0, 0, 0, 0};
    if (Status st = db.put_rate_minutes(rows); !st.ok()) {
        log_warn("forecast_history_write_failed error=\"{}\"", st.error().message);
    }
}

void ForecastTier::worker() {
    // Forecasting yields to serving: the lowest priority this thread may take.
    setpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)), 19);
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
        cv_.wait(lock, [&] { return stop_ || pending_; });
        if (stop_) return;
        pending_ = false;
        busy_ = true;
        const RateSeries s = series_;
        const int64_t minute = series_end_;
        lock.unlock();
        fit(s, minute);
        lock.lock();
        busy_ = false;
        idle_cv_.notify_all();
    }
}

FitResult fit_models(const RateSeries& s, const ForecastOptions& o) {
    FitResult r;
    const auto t0 = std::chrono::steady_clock::now();
    r.models = classic_models();
    const int64_t origin0 =
        int64_t(s.size()) - o.horizon - int64_t(o.backtest_folds - 1) * o.backtest_step;
    std::string lstm_error = "lstm: needs more history for an out-of-sample backtest";
    if (origin0 > 0) {
        auto l = train_lstm(RateSeries(s.begin(), s.begin() + origin0), o.lstm, &r.lstm);
        if (l.ok()) {
            r.models.push_back(std::move(l).value());
            lstm_error.clear();
        } else {
            lstm_error = l.error().message;
        }
    }
    std::vector<const Forecaster*> ptrs;
    for (const auto& m : r.models) ptrs.push_back(m.get());
    r.ranking = backtest(ptrs, s, o.horizon, o.backtest_folds, o.backtest_step);
    if (!lstm_error.empty()) {
        r.ranking.push_back({"lstm", std::numeric_limits<double>::infinity(), 0, lstm_error});
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

void ForecastTier::fit(const RateSeries& s, int64_t minute) {
    bool refit = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        refit = ranking_.empty() || minute - last_fit_minute_ >= o_.refit_minutes;
    }
    std::vector<BacktestResult> ranking;
    LstmTrainReport rep;
    double seconds = 0;
    if (refit) {
        FitResult r = fit_models(s, o_);
        ranking = std::move(r.ranking);
        models_ = std::move(r.models);
        rep = r.lstm;
        seconds = r.seconds;
    } else {
        std::lock_guard<std::mutex> lock(mu_);
        ranking = ranking_;
    }
    // The best model that forecasts; the ones before it that failed are the fallback's reason.
    std::string chosen, fallback;
    std::vector<double> forecast;
    for (const BacktestResult& r : ranking) {
        if (r.windows == 0) continue;
        auto it = std::find_if(models_.begin(), models_.end(),
                               [&](const auto& m) { return m->name() == r.name; });
        if (it == models_.end()) continue;
        auto f = (*it)->forecast(s, o_.horizon);
        if (f.ok()) {
            chosen = r.name;
            forecast = std::move(f).value();
            break;
        }
        fallback += fmt::format("{} failed: {}; ", r.name, f.error().message);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (refit) {
        ranking_ = std::move(ranking);
        last_fit_minute_ = minute;
        lstm_report_ = rep;
        fit_seconds_ = seconds;
    }
    if (chosen != chosen_ || fallback != fallback_reason_) {
        log_info("forecast_model chosen={} fallback=\"{}\"",
                 chosen.empty() ? "none (reactive only)" : chosen, fallback);
    }
    chosen_ = chosen;
    fallback_reason_ = fallback;
    forecast_ = std::move(forecast);
    forecast_from_ = minute;
    update_prewarm_locked();
}

void ForecastTier::update_prewarm_locked() {
    Prewarm p;
    // The observed rate is published whether or not a model forecasts yet (a young history
    // has no forecast, and its traffic is still traffic).
    double current = 0;
    if (!series_.empty()) {
        const size_t k = std::min<size_t>(kCurrentMinutes, series_.size());
        for (size_t i = series_.size() - k; i < series_.size(); ++i) {
            current += series_[i] / double(k);
        }
    }
    p.current_rps = current;
    if (!forecast_.empty() && !series_.empty()) {
        const double peak = *std::max_element(series_.begin(), series_.end());
        const double base = std::max({current, 0.05 * peak, 1.0 / 60.0});
        p.threshold_rps = o_.rise_factor * base;
        for (int64_t lead = 0; lead <= o_.lead_minutes; ++lead) {
            const double v = predicted_at(forecast_, forecast_from_, series_end_, lead);
            if (!std::isfinite(v)) break;
            if (v < p.threshold_rps) continue;
            // Progressive: low in the first third of the lead, medium in the second, high
            // in the last.
            const double third = double(o_.lead_minutes) / 3.0;
            p.level = double(lead) <= third       ? WarmLevel::kHigh
                      : double(lead) <= 2 * third ? WarmLevel::kMedium
                                                  : WarmLevel::kLow;
            p.lead_minutes = double(lead);
            p.predicted_rps = v;
            break;
        }
    }
    prewarm_ = p;
}

Prewarm ForecastTier::prewarm() const {
    std::lock_guard<std::mutex> lock(mu_);
    return prewarm_;
}

namespace {}  // namespace

double ForecastTier::peak_ahead_locked() const {
    double peak = 0;
    for (int64_t a = 0; a <= o_.lead_minutes; ++a) {
        const double v = predicted_at(forecast_, forecast_from_, series_end_, a);
        if (std::isfinite(v)) peak = std::max(peak, v);
    }
    return peak;
}

double ForecastTier::capacity_rps_locked() const {
    return o_.replica_capacity_rps > 0 ? o_.replica_capacity_rps : peak_comfortable_rps_;
}

nlohmann::json ForecastTier::report(int64_t now_ms) const {
    std::lock_guard<std::mutex> lock(mu_);
    nlohmann::json models = nlohmann::json::array();
    for (const BacktestResult& r : ranking_) {
        nlohmann::json m = {{"model", r.name}, {"windows", r.windows}};
        m["mae_rps"] = r.windows > 0 ? nlohmann::json(r.mae) : nlohmann::json();
        if (!r.error.empty()) m["error"] = r.error;
        models.push_back(m);
    }
    nlohmann::json forecast = nlohmann::json::array();
    for (size_t i = 0; i < forecast_.size(); ++i) {
        forecast.push_back({{"minute", forecast_from_ + int64_t(i)}, {"rps", forecast_[i]}});
    }
    const double capacity = capacity_rps_locked();
    return {{"clock_ms", clock_ms(now_ms)},
            {"clock_scale", o_.clock_scale},
            {"minute", series_end_},
            {"history_minutes", series_.size()},
            {"model", chosen_.empty() ? nlohmann::json() : nlohmann::json(chosen_)},
            {"mode", chosen_.empty() ? "reactive only: no model can forecast yet" : "predictive"},
            {"fallback", fallback_reason_},
            {"backtest",
             {{"folds", o_.backtest_folds},
              {"step_minutes", o_.backtest_step},
              {"horizon_minutes", o_.horizon},
              {"refit_every_minutes", o_.refit_minutes},
              {"last_fit_minute",
               ranking_.empty() ? nlohmann::json() : nlohmann::json(last_fit_minute_)},
              {"fit_seconds", fit_seconds_},
              {"lstm_loss", {{"first", lstm_report_.first_loss}, {"last", lstm_report_.last_loss}}},
              {"models", models}}},
            {"forecast", forecast},
            {"prewarm",
             {{"level", warm_level_name(prewarm_.level)},
              {"lead_minutes", prewarm_.lead_minutes},
              {"current_rps", prewarm_.current_rps},
              {"threshold_rps", prewarm_.threshold_rps},
              {"predicted_rps", prewarm_.predicted_rps},
              {"lead_limit_minutes", o_.lead_minutes},
              {"rise_factor", o_.rise_factor}}},
            {"replica_capacity_rps", capacity},
            {"capacity_source", o_.replica_capacity_rps > 0 ? "--replica-capacity-rps"
                                                            : "the history's busiest minute with "
                                                              "a shallow queue"},
            {"recommended_replicas", recommended_replicas(peak_ahead_locked(), capacity)}};
}

int64_t recommended_replicas(double peak_rps, double capacity_rps) {
    if (!(capacity_rps > 0)) return 1;
    return std::max<int64_t>(1, int64_t(std::ceil(peak_rps / capacity_rps - 1e-9)));
}

std::string ForecastTier::metrics_text(const std::string& model_name) const {
    std::lock_guard<std::mutex> lock(mu_);
    metrics::TextWriter w;
    const metrics::Labels model = {{"model_name", model_name}};
    w.family("pagoda_forecast_requests_per_second", "gauge",
             "Predicted arrival rate this many minutes ahead (the chosen forecaster; absent "
             "while none can forecast).");
    for (int64_t h : {5, 15, 30}) {
        const double v = predicted_at(forecast_, forecast_from_, series_end_, h);
        if (!std::isfinite(v)) continue;
        w.sample("pagoda_forecast_requests_per_second",
                 {{"model_name", model_name}, {"horizon", fmt::format("{}m", h)}}, v);
    }
    w.family("pagoda_forecast_observed_requests_per_second", "gauge",
             "Arrival rate over the last 10 closed minutes of the forecast clock.");
    w.sample("pagoda_forecast_observed_requests_per_second", model, prewarm_.current_rps);
    w.family("pagoda_forecast_recommended_replicas", "gauge",
             "Replicas the predicted peak of the pre-warm lead needs at this replica's capacity "
             "(for KEDA or an HPA on external metrics).");
    w.sample("pagoda_forecast_recommended_replicas", model,
             double(recommended_replicas(peak_ahead_locked(), capacity_rps_locked())));
    w.family("pagoda_forecast_backtest_mae", "gauge",
             "Mean absolute error (requests/s) of each forecaster on the rolling backtest.");
    for (const BacktestResult& r : ranking_) {
        if (r.windows == 0) continue;
        w.sample("pagoda_forecast_backtest_mae", {{"model_name", model_name}, {"model", r.name}},
                 r.mae);
    }
    w.family("pagoda_forecast_model_info", "gauge", "1 for the forecaster in use.");
    if (!chosen_.empty()) {
        w.sample("pagoda_forecast_model_info", {{"model_name", model_name}, {"model", chosen_}},
                 1.0);
    }
    return w.text();
}

void ForecastTier::wait_idle() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return stop_ || (!pending_ && !busy_); });
}

}  // namespace pagoda::control
