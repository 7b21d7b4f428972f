// The built-in day, steady probe loads and trace days (day.h).
#include "rehearse/day.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "bench/trace_formats.h"

namespace pagoda::rehearse {

namespace {

// (hour, share of the peak), linear in between: a business-hours API.
constexpr std::pair<double, double> kShape[] = {{0, 0.12},  {5, 0.06},  {7, 0.30},    {9, 0.85},
                                                {11, 1.0},  {12, 0.70}, {13.5, 0.95}, {16, 1.0},
                                                {18, 0.65}, {20, 0.40}, {22, 0.22},   {24, 0.12}};

// 70% short (chat turns), 30% long (documents, RAG), log-normal lengths.
Arrival draw_request(std::mt19937_64& rng, int max_model_len) {
    std::uniform_real_distribution<double> u(0, 1);
    Arrival a;
    a.long_prompt = u(rng) < 0.3;
    std::lognormal_distribution<double> in(std::log(a.long_prompt ? 2500.0 : 250.0),
                                           a.long_prompt ? 0.4 : 0.6);
    std::lognormal_distribution<double> out(std::log(a.long_prompt ? 250.0 : 150.0), 0.5);
    a.prompt = int32_t(std::clamp(in(rng), 8.0, a.long_prompt ? 7000.0 : 2000.0));
    a.output = int32_t(std::clamp(out(rng), 4.0, a.long_prompt ? 1024.0 : 512.0));
    a.prompt = std::min(a.prompt, max_model_len - a.output);
    return a;
}

}  // namespace

double builtin_shape(double day_s) {
    const double h = std::fmod(day_s / 3600, 24);
    for (size_t i = 1; i < std::size(kShape); ++i) {
        if (h <= kShape[i].first) {
            const auto [h0, v0] = kShape[i - 1];
            const auto [h1, v1] = kShape[i];
            return v0 + (v1 - v0) * (h - h0) / (h1 - h0);
        }
    }
    return kShape[0].second;
}

Day builtin_day(const BuiltinDayOptions& o) {
    Day d;
    d.name = "builtin";
    d.shape = {86400, o.compress};
    std::mt19937_64 rng(o.seed);
    std::uniform_real_distribution<double> u(0, 1);
    // Bursts: 10 minutes at 1.6x, between 08:00 and 21:00.
    std::vector<double> burst_at;
    for (int i = 0; i < o.bursts; ++i) burst_at.push_back((8 + 13 * u(rng)) * 3600);
    auto rate = [&](double day_s) {
        double r = o.peak_rps * builtin_shape(day_s);
        for (double b : burst_at) {
            if (day_s >= b && day_s < b + 600) r *= 1.6;
        }
        return r;
    };
    const double max_rate = 1.6 * o.peak_rps, end = d.shape.day_s / o.compress;
    std::exponential_distribution<double> gap(max_rate);
    d.rate_per_min.assign(1440, 0);
    for (double t = gap(rng); t < end; t += gap(rng)) {  // thinning
        const double day_s = t * o.compress;
        if (u(rng) * max_rate > rate(day_s)) continue;
        Arrival a = draw_request(rng, o.max_model_len);
        a.t_s = t;
        d.arrivals.push_back(a);
    }
    for (int m = 0; m < 1440; ++m) d.rate_per_min[size_t(m)] = rate(m * 60.0 + 30);
    for (int h = 0; h < 24; ++h)
        d.peak_hour_rps = std::max(d.peak_hour_rps, o.peak_rps * builtin_shape(h * 3600.0 + 1800));
    return d;
}

std::vector<Arrival> steady_load(double rps, double seconds, uint64_t seed, int max_model_len,
                                 const std::vector<Arrival>* mix) {
    std::mt19937_64 rng(seed);
    std::exponential_distribution<double> gap(rps);
    std::vector<Arrival> v;
    for (double t = gap(rng); t < seconds; t += gap(rng)) {
        Arrival a = mix && !mix->empty() ? (*mix)[size_t(rng() % mix->size())]
                                         : draw_request(rng, max_model_len);
        a.t_s = t;
        v.push_back(a);
    }
    return v;
}

Result<Day> trace_day(const std::string& path, double compress, double hours, int max_model_len) {
    PAGODA_ASSIGN_OR_RETURN(bench::Trace tr, bench::read_trace_file(path, {}));
    Day d;
    d.name = path;
    const double t0 = tr.records.front().ts_s;
    double last = 0;
    for (const auto& r : tr.records) last = std::max(last, r.ts_s - t0);
    if (hours > 0) last = std::min(last, hours * 3600);
    d.shape = {std::max(60.0, std::ceil(last / 60) * 60), compress};
    d.rate_per_min.assign(size_t(d.shape.day_s / 60) + 1, 0);
    int64_t k = 0;
    for (const auto& r : tr.records) {
        const double day_s = r.ts_s - t0;
        if (day_s > d.shape.day_s) break;
        d.rate_per_min[size_t(day_s / 60)] += 1.0 / 60;
        if (k++ % int64_t(std::max(1.0, std::round(compress))) != 0) continue;
        Arrival a;
        a.t_s = day_s / compress;
        a.output = int32_t(std::clamp<int64_t>(r.output_len, 1, max_model_len / 2));
        a.prompt = int32_t(std::clamp<int64_t>(r.input_len, 1, max_model_len - a.output));
        a.long_prompt = a.prompt >= 1024;
        d.arrivals.push_back(a);
    }
    for (size_t h = 0; h * 60 < d.rate_per_min.size(); ++h) {
        double sum = 0;
        size_t n = 0;
        for (size_t m = h * 60; m < std::min(d.rate_per_min.size(), h * 60 + 60); ++m, ++n) {
            sum += d.rate_per_min[m];
        }
        d.peak_hour_rps = std::max(d.peak_hour_rps, sum / double(std::max<size_t>(1, n)));
    }
    return d;
}

std::vector<double> smooth(const std::vector<double>& per_min, int window) {
    std::vector<double> out(per_min.size());
    for (size_t i = 0; i < per_min.size(); ++i) {
        double s = 0;
        int n = 0;
        for (int k = -window / 2; k <= window / 2; ++k) {
            const long j = long(i) + k;
            if (j < 0 || j >= long(per_min.size())) continue;
            s += per_min[size_t(j)];
            ++n;
        }
        out[i] = s / n;
    }
    return out;
}

}  // namespace pagoda::rehearse
