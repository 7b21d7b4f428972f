// The LSTM forecaster: one LSTM layer of `hidden` cells and a linear read-out, trained in
// process with truncated backpropagation through time and Adam on windows drawn from the
// history by a seeded generator. Inputs per minute: the rate scaled by the history's peak,
// and sine/cosine of the minute's phase in the day and in the week (the series is
// contiguous, so its index gives the phase up to a constant offset the net learns).
// Output: the next minute's scaled rate. A forecast runs the last `context` minutes through
// the net, then feeds each prediction back as the next input.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "control/forecast/forecast.h"

namespace pagoda::control {

namespace {

constexpr int kIn = 5;
constexpr double kDay = 1440, kWeek = 10080;

void features(double scaled_rate, int64_t t, double* x) {
    x[0] = scaled_rate;
    x[1] = std::sin(2 * M_PI * double(t) / kDay);
    x[2] = std::cos(2 * M_PI * double(t) / kDay);
    x[3] = std::sin(2 * M_PI * double(t) / kWeek);
    x[4] = std::cos(2 * M_PI * double(t) / kWeek);
}

double sigmoid(double z) { return 1 / (1 + std::exp(-z)); }

// Parameters in one flat vector: W (4H x (kIn + H), gates i f g o), b (4H), wy (H), by.
struct Layout {
    int h;
    size_t cols() const { return size_t(kIn + h); }
    size_t w() const { return 0; }
    size_t b() const { return size_t(4 * h) * cols(); }
    size_t wy() const { return b() + size_t(4 * h); }
    size_t by() const { return wy() + size_t(h); }
    size_t size() const { return by() + 1; }
};

// What one step keeps for the backward pass.
struct Step {
    std::vector<double> in;  // x then h_prev
    std::vector<double> c_prev, gates, c, h;
    double y = 0;
};

// One LSTM step: updates h and c, returns the read-out.
double forward(const Layout& L, const std::vector<double>& p, const double* x,
               std::vector<double>& h, std::vector<double>& c, Step* keep) {
    const int H = L.h;
    std::vector<double> in(L.cols());
    std::copy(x, x + kIn, in.begin());
    std::copy(h.begin(), h.end(), in.begin() + kIn);
    std::vector<double> z(size_t(4 * H));
    for (size_t r = 0; r < z.size(); ++r) {
        double acc = p[L.b() + r];
        const double* row = &p[L.w() + r * L.cols()];
        for (size_t k = 0; k < in.size(); ++k) acc += row[k] * in[k];
        z[r] = acc;
    }
    std::vector<double> c_prev = c;
    double y = p[L.by()];
    for (int j = 0; j < H; ++j) {
        const size_t u = size_t(j);
        z[u] = sigmoid(z[u]);                                    // input gate
        z[size_t(H) + u] = sigmoid(z[size_t(H) + u]);            // forget gate
        z[size_t(2 * H) + u] = std::tanh(z[size_t(2 * H) + u]);  // candidate
        z[size_t(3 * H) + u] = sigmoid(z[size_t(3 * H) + u]);    // output gate
        c[u] = z[size_t(H) + u] * c_prev[u] + z[u] * z[size_t(2 * H) + u];
        h[u] = z[size_t(3 * H) + u] * std::tanh(c[u]);
        y += p[L.wy() + u] * h[u];
    }
    if (keep != nullptr) *keep = Step{std::move(in), std::move(c_prev), std::move(z), c, h, y};
    return y;
}

// Backward through one window's steps; adds to `g`, returns the window's mean squared error.
double backward(const Layout& L, const std::vector<double>& p, const std::vector<Step>& steps,
                const std::vector<double>& target, std::vector<double>& g) {
    const int H = L.h;
    const double n = double(steps.size());
    std::vector<double> dh_next(size_t(H), 0.0), dc_next(size_t(H), 0.0);
    std::vector<double> dz(size_t(4 * H));
    double loss = 0;
    for (size_t t = steps.size(); t-- > 0;) {
        const Step& s = steps[t];
        const double err = s.y - target[t];
        loss += err * err / n;
        const double dy = 2 * err / n;
        g[L.by()] += dy;
        for (int j = 0; j < H; ++j) {
            const size_t u = size_t(j);
            const double i = s.gates[u], f = s.gates[size_t(H) + u];
            const double cand = s.gates[size_t(2 * H) + u], o = s.gates[size_t(3 * H) + u];
            g[L.wy() + u] += dy * s.h[u];
            const double dh = dy * p[L.wy() + u] + dh_next[u];
            const double tc = std::tanh(s.c[u]);
            const double dc = dh * o * (1 - tc * tc) + dc_next[u];
            dz[u] = dc * cand * i * (1 - i);
            dz[size_t(H) + u] = dc * s.c_prev[u] * f * (1 - f);
            dz[size_t(2 * H) + u] = dc * i * (1 - cand * cand);
            dz[size_t(3 * H) + u] = dh * tc * o * (1 - o);
            dc_next[u] = dc * f;
        }
        std::fill(dh_next.begin(), dh_next.end(), 0.0);
        for (size_t r = 0; r < dz.size(); ++r) {
            g[L.b() + r] += dz[r];
            double* grow = &g[L.w() + r * L.cols()];
            const double* prow = &p[L.w() + r * L.cols()];
            for (size_t k = 0; k < s.in.size(); ++k) grow[k] += dz[r] * s.in[k];
            for (int j = 0; j < H; ++j) dh_next[size_t(j)] += dz[r] * prow[kIn + j];
        }
    }
    return loss;
}

class Lstm : public Forecaster {
  public:
    Lstm(Layout l, std::vector<double> p, double scale, int context)
        : l_(l), p_(std::move(p)), scale_(scale), context_(context) {}
    std::string name() const override { return "lstm"; }
    Result<std::vector<double>> forecast(const RateSeries& hist, int horizon) const override {
        if (hist.empty()) return make_error(ErrorCode::kOutOfRange, "lstm: no history");
        std::vector<double> h(size_t(l_.h), 0.0), c(size_t(l_.h), 0.0);
        double x[kIn];
        const int64_t n = int64_t(hist.size());
        double y = 0;
        for (int64_t t = std::max<int64_t>(0, n - context_); t < n; ++t) {
            features(hist[size_t(t)] / scale_, t, x);
            y = forward(l_, p_, x, h, c, nullptr);
        }
        std::vector<double> out;
        for (int i = 0; i < horizon; ++i) {
            if (!std::isfinite(y)) return make_error(ErrorCode::kInternal, "lstm: not finite");
            out.push_back(std::max(0.0, y * scale_));
            features(std::max(0.0, y), n + i, x);
            y = forward(l_, p_, x, h, c, nullptr);
        }
        return out;
    }

  private:
    Layout l_;
    std::vector<double> p_;
    double scale_;
    int context_;
};

// One Adam update with the gradient clipped to norm 1.
struct Adam {
    std::vector<double> m, v;
    int t = 0;
    void update(std::vector<double>& p, std::vector<double>& g, double lr) {
        double norm = 0;
        for (double x : g) norm += x * x;
        norm = std::sqrt(norm);
        const double clip = norm > 1 ? 1 / norm : 1;
        ++t;
        const double c1 = 1 - std::pow(0.9, t), c2 = 1 - std::pow(0.999, t);
        for (size_t k = 0; k < p.size(); ++k) {
            const double gk = g[k] * clip;
            m[k] = 0.9 * m[k] + 0.1 * gk;
            v[k] = 0.999 * v[k] + 0.001 * gk * gk;
            p[k] -= lr * (m[k] / c1) / (std::sqrt(v[k] / c2) + 1e-8);
        }
    }
};

// Uniform in [0, 1) from the generator's bits (the same on every standard library).
double uniform(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

// One window's loss and gradient, starting at minute `start`.
double window_grad(const Layout& L, const std::vector<double>& p, const RateSeries& s, double scale,
                   int64_t start, int window, std::vector<double>& g) {
    std::vector<double> h(size_t(L.h), 0.0), c(size_t(L.h), 0.0), target;
    std::vector<Step> steps{size_t(window)};
    double x[kIn];
    for (int k = 0; k < window; ++k) {
        const int64_t t = start + k;
        features(s[size_t(t)] / scale, t, x);
        forward(L, p, x, h, c, &steps[size_t(k)]);
        target.push_back(s[size_t(t + 1)] / scale);
    }
    return backward(L, p, steps, target, g);
}

}  // namespace

Result<std::unique_ptr<Forecaster>> train_lstm(const RateSeries& s, const LstmOptions& o,
                                               LstmTrainReport* report) {
    const auto t0 = std::chrono::steady_clock::now();
    if (o.hidden < 1 || o.window < 2 || o.batch < 1 || o.iterations < 1) {
        return make_error(ErrorCode::kInvalidArgument, "lstm: bad options");
    }
    if (int64_t(s.size()) < o.window + 2) {
        return make_error(ErrorCode::kOutOfRange, "lstm: needs {} minutes of history, has {}",
                          o.window + 2, s.size());
    }
    double scale = 0;
    for (double v : s) scale = std::max(scale, v);
    if (!(scale > 0) || !std::isfinite(scale)) scale = 1;
    const Layout L{o.hidden};
    std::mt19937_64 rng(o.seed);
    std::vector<double> p(L.size());
    const double init = 1 / std::sqrt(double(L.cols()));
    for (double& x : p) x = (2 * uniform(rng) - 1) * init;
    for (int j = 0; j < o.hidden; ++j) p[L.b() + size_t(o.hidden + j)] = 1.0;  // forget bias
    Adam adam{std::vector<double>(p.size(), 0.0), std::vector<double>(p.size(), 0.0)};
    std::vector<double> losses;
    const int64_t starts = int64_t(s.size()) - o.window - 1;
    for (int it = 0; it < o.iterations; ++it) {
        std::vector<double> g(p.size(), 0.0);
        double loss = 0;
        for (int b = 0; b < o.batch; ++b) {
            const int64_t start = int64_t(uniform(rng) * double(starts + 1));
            loss += window_grad(L, p, s, scale, start, o.window, g) / o.batch;
        }
        if (!std::isfinite(loss)) {
            return make_error(ErrorCode::kInternal,
                              "lstm: training diverged at update {} (loss not finite)", it);
        }
        for (double& x : g) x /= o.batch;
        adam.update(p, g, o.learning_rate);
        losses.push_back(loss);
    }
    if (report != nullptr) {
        const size_t k = std::min<size_t>(10, losses.size());
        double first = 0, last = 0;
        for (size_t i = 0; i < k; ++i) {
            first += losses[i] / double(k);
            last += losses[losses.size() - 1 - i] / double(k);
        }
        *report = {first, last, o.iterations,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
    }
    return std::unique_ptr<Forecaster>(std::make_unique<Lstm>(L, std::move(p), scale, o.context));
}

}  // namespace pagoda::control
