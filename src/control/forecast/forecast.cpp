// The implementation of control/forecast/forecast.h (the contract is there).
#include "control/forecast/forecast.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace pagoda::control {

namespace {

class SeasonalNaive : public Forecaster {
  public:
    explicit SeasonalNaive(int season) : season_(season) {}
    std::string name() const override { return fmt::format("seasonal_naive_{}m", season_); }
    Result<std::vector<double>> forecast(const RateSeries& h, int horizon) const override {
        if (int64_t(h.size()) < season_) {
            return make_error(ErrorCode::kOutOfRange, "{}: needs {} minutes of history, has {}",
                              name(), season_, h.size());
        }
        std::vector<double> out;
        for (int i = 0; i < horizon; ++i) {
            // Minute n + i repeats minute n + i - k*season for the smallest k reaching history.
            int64_t idx = int64_t(h.size()) + i - season_;
            while (idx >= int64_t(h.size())) idx -= season_;
            out.push_back(h[size_t(idx)]);
        }
        return out;
    }

  private:
    int season_;
};

struct HwFit {
    double level = 0, trend = 0, sse = 0;
    std::vector<double> season;  // by phase
};

// One pass of additive Holt-Winters over `h`; the one-step-ahead squared error in sse.
HwFit run_hw(const RateSeries& h, int m, double a, double b, double g) {
    HwFit f;
    double mean0 = 0, mean1 = 0;
    for (int i = 0; i < m; ++i) {
        mean0 += h[size_t(i)];
        mean1 += h[size_t(m + i)];
    }
    mean0 /= m;
    mean1 /= m;
    f.level = mean0;
    f.trend = (mean1 - mean0) / m;
    f.season.resize(size_t(m));
    for (int i = 0; i < m; ++i) f.season[size_t(i)] = h[size_t(i)] - mean0;
    for (size_t t = size_t(m); t < h.size(); ++t) {
        double& s = f.season[t % size_t(m)];
        const double pred = f.level + f.trend + s;
        f.sse += (h[t] - pred) * (h[t] - pred);
        const double last_level = f.level;
        f.level = a * (h[t] - s) + (1 - a) * (f.level + f.trend);
        f.trend = b * (f.level - last_level) + (1 - b) * f.trend;
        s = g * (h[t] - f.level) + (1 - g) * s;
    }
    return f;
}

class HoltWinters : public Forecaster {
  public:
    explicit HoltWinters(int season) : season_(season) {}
    std::string name() const override { return fmt::format("holt_winters_{}m", season_); }
    Result<std::vector<double>> forecast(const RateSeries& h, int horizon) const override {
        if (int64_t(h.size()) < 2 * int64_t(season_)) {
            return make_error(ErrorCode::kOutOfRange, "{}: needs {} minutes of history, has {}",
                              name(), 2 * season_, h.size());
        }
        HwFit best;
        best.sse = std::numeric_limits<double>::infinity();
        for (double a : {0.05, 0.2, 0.5}) {
            for (double b : {0.0, 0.01, 0.1}) {
                for (double g : {0.05, 0.2, 0.5}) {
                    HwFit f = run_hw(h, season_, a, b, g);
                    if (std::isfinite(f.sse) && f.sse < best.sse) best = std::move(f);
                }
            }
        }
        if (!std::isfinite(best.sse)) {
            return make_error(ErrorCode::kInternal, "{}: the fit did not converge", name());
        }
        std::vector<double> out;
        const size_t n = h.size();
        for (int i = 1; i <= horizon; ++i) {
            const double s = best.season[(n + size_t(i) - 1) % size_t(season_)];
            out.push_back(std::max(0.0, best.level + i * best.trend + s));
        }
        return out;
    }

  private:
    int season_;
};

}  // namespace

std::unique_ptr<Forecaster> seasonal_naive(int season) {
    return std::make_unique<SeasonalNaive>(season);
}
std::unique_ptr<Forecaster> holt_winters(int season) {
    return std::make_unique<HoltWinters>(season);
}

std::vector<BacktestResult> backtest(const std::vector<const Forecaster*>& models,
                                     const RateSeries& series, int horizon, int folds, int step) {
    std::vector<BacktestResult> out;
    for (const Forecaster* m : models) {
        BacktestResult r{m->name(), 0, 0, ""};
        double abs_sum = 0;
        int64_t n = 0;
        for (int k = folds; k >= 1; --k) {
            const int64_t origin = int64_t(series.size()) - horizon - int64_t(k - 1) * step;
            if (origin <= 0) continue;
            const RateSeries hist(series.begin(), series.begin() + origin);
            auto f = m->forecast(hist, horizon);
            if (!f.ok()) {
                r.error = f.error().message;
                continue;
            }
            for (int i = 0; i < horizon; ++i) {
                abs_sum += std::abs((*f)[size_t(i)] - series[size_t(origin + i)]);
                ++n;
            }
            ++r.windows;
        }
        r.mae = n > 0 ? abs_sum / double(n) : std::numeric_limits<double>::infinity();
        if (r.windows == folds) {
            r.error.clear();
        } else if (r.windows > 0) {
            // Ranked only on every origin: errors over fewer (later) windows do not compare.
            r.error = fmt::format("forecast {} of {} origins ({}); ranked after the others",
                                  r.windows, folds, r.error);
        }
        out.push_back(r);
    }
    std::stable_sort(out.begin(), out.end(), [&](const BacktestResult& a, const BacktestResult& b) {
        if ((a.windows == folds) != (b.windows == folds)) return a.windows == folds;
        if ((a.windows > 0) != (b.windows > 0)) return a.windows > 0;
        return a.mae < b.mae;
    });
    return out;
}

}  // namespace pagoda::control
