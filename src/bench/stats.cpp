// Statistics of a load run: the implementation (the contract is in bench/stats.h).
#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace pagoda::bench {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}

double RequestRecord::tpot_ms() const {
    int64_t n = output_tokens();
    if (n < 2 || first_token_s < 0) return kNaN;
    return (done_s - first_token_s) * 1000 / double(n - 1);
}

double percentile_sorted(const std::vector<double>& v, double q) {
    if (v.empty()) return kNaN;
    double pos = q * double(v.size() - 1);
    size_t i = size_t(std::floor(pos));
    if (i + 1 >= v.size()) return v.back();
    double frac = pos - double(i);
    return v[i] + (v[i + 1] - v[i]) * frac;
}

Summary summarize(std::vector<double> v) {
    Summary s;
    v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
    s.n = v.size();
    if (v.empty()) {
        s.mean = s.stddev = s.p50 = s.p90 = s.p95 = s.p99 = s.p999 = s.max = kNaN;
        return s;
    }
    std::sort(v.begin(), v.end());
    double sum = std::accumulate(v.begin(), v.end(), 0.0);
    s.mean = sum / double(v.size());
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.stddev = v.size() > 1 ? std::sqrt(ss / double(v.size() - 1)) : 0;
    s.p50 = percentile_sorted(v, 0.5);
    s.p90 = percentile_sorted(v, 0.9);
    s.p95 = percentile_sorted(v, 0.95);
    s.p99 = percentile_sorted(v, 0.99);
    s.p999 = percentile_sorted(v, 0.999);
    s.max = v.back();
    return s;
}

double metric_value(const Stats& s, const std::string& m) {
    if (m == "error_rate") return s.error_rate;
    if (m == "requests_per_s") return s.requests_per_s;
    if (m == "output_tokens_per_s") return s.output_tokens_per_s;
    if (m == "input_tokens_per_s") return s.input_tokens_per_s;
    if (m == "goodput_rps") return s.goodput_rps;
    if (m == "goodput_ratio") return s.goodput_ratio;
    if (m == "latency_fluctuation") return s.latency_fluctuation;
    if (m == "busy_ratio") return s.busy_ratio;
    if (m == "completed") return double(s.completed);
    if (m == "failed") return double(s.failed);
    // STAT_NAME_ms
    size_t us = m.find('_');
    if (us == std::string::npos || !m.ends_with("_ms")) return kNaN;
    std::string stat = m.substr(0, us), name = m.substr(us + 1, m.size() - us - 4);
    const Summary* sm = name == "ttft"   ? &s.ttft
                        : name == "itl"  ? &s.itl
                        : name == "tpot" ? &s.tpot
                        : name == "e2e"  ? &s.e2e
                                         : nullptr;
    if (!sm || sm->n == 0) return kNaN;
    if (stat == "mean") return sm->mean;
    if (stat == "stddev") return sm->stddev;
    if (stat == "p50") return sm->p50;
    if (stat == "p90") return sm->p90;
    if (stat == "p95") return sm->p95;
    if (stat == "p99") return sm->p99;
    if (stat == "p999") return sm->p999;
    if (stat == "max") return sm->max;
    return kNaN;
}

bool higher_is_better(const std::string& m) {
    return m == "requests_per_s" || m == "output_tokens_per_s" || m == "input_tokens_per_s" ||
           m == "goodput_rps" || m == "goodput_ratio" || m == "completed";
}

bool meets_slo(const RequestRecord& r, const Slo& slo) {
    if (!r.ok()) return false;
    if (slo.ttft_ms && !(r.ttft_ms() <= *slo.ttft_ms)) return false;
    if (slo.e2e_ms && !(r.e2e_ms() <= *slo.e2e_ms)) return false;
    if (slo.tpot_ms) {
        double t = r.tpot_ms();
        if (!std::isnan(t) && t > *slo.tpot_ms) return false;
    }
    if (slo.itl_ms) {
        for (size_t i = 1; i < r.token_s.size(); ++i) {
            if ((r.token_s[i] - r.token_s[i - 1]) * 1000 > *slo.itl_ms) return false;
        }
    }
    return true;
}

namespace {

Stats compute_stats(const std::string& name, const std::vector<const RequestRecord*>& rs,
                    const Scenario& s) {
    Stats st;
    st.name = name;
    std::vector<double> ttft, itl, tpot, e2e;
    double first = std::numeric_limits<double>::infinity(), last = 0;
    int64_t good = 0;
    for (const RequestRecord* r : rs) {
        ++st.sent;
        if (r->sent_s >= 0) first = std::min(first, r->sent_s);
        if (r->done_s >= 0) last = std::max(last, r->done_s);
        if (!r->ok()) {
            ++st.failed;
            ++st.errors[r->error_kind];
            continue;
        }
        ++st.completed;
        if (r->first_token_s >= 0) ttft.push_back(r->ttft_ms());
        e2e.push_back(r->e2e_ms());
        tpot.push_back(r->tpot_ms());
        for (size_t i = 1; i < r->token_s.size(); ++i)
            itl.push_back((r->token_s[i] - r->token_s[i - 1]) * 1000);
        st.output_tokens += r->output_tokens();
        st.input_tokens += r->prompt_tokens >= 0 ? r->prompt_tokens : r->target_input;
        if (meets_slo(*r, s.classes[size_t(r->klass)].slo)) ++good;
    }
    st.ttft = summarize(ttft);
    st.itl = summarize(itl);
    st.tpot = summarize(tpot);
    st.e2e = summarize(e2e);
    st.span_s = last > first ? last - first : 0;
    if (st.span_s > 0) {
        st.requests_per_s = double(st.completed) / st.span_s;
        st.output_tokens_per_s = double(st.output_tokens) / st.span_s;
        st.input_tokens_per_s = double(st.input_tokens) / st.span_s;
        st.goodput_rps = double(good) / st.span_s;
    }
    st.goodput_ratio = st.sent > 0 ? double(good) / double(st.sent) : 0;
    st.error_rate = st.sent > 0 ? double(st.failed) / double(st.sent) : 0;
    // Fluctuation: the worst window median of e2e against the overall median.
    if (st.e2e.n > 0 && st.e2e.p50 > 0) {
        std::map<int64_t, std::vector<double>> windows;
        for (const RequestRecord* r : rs) {
            if (r->ok())
                windows[int64_t(std::floor(r->scheduled_s / s.window_s))].push_back(r->e2e_ms());
        }
        double worst = 0;
        for (auto& [w, v] : windows) {
            if (v.size() < 5) continue;
            std::sort(v.begin(), v.end());
            worst = std::max(worst, std::fabs(percentile_sorted(v, 0.5) / st.e2e.p50 - 1));
        }
        st.latency_fluctuation = worst;
    }
    return st;
}

}  // namespace

Report build_report(const Scenario& s, const std::vector<RequestRecord>& records,
                    double run_duration_s, int target) {
    Report rep;
    rep.scenario = s.name;
    rep.scenario_hash = s.hash();
    rep.duration_s = run_duration_s;
    double end = s.duration_s > 0 ? s.duration_s : run_duration_s;
    rep.window_begin_s = s.warmup_s;
    rep.window_end_s = std::max(s.warmup_s, end - s.cooldown_s);
    std::vector<const RequestRecord*> all;
    std::vector<std::vector<const RequestRecord*>> per_class(s.classes.size());
    std::vector<double> lags;
    for (const auto& r : records) {
        if (r.target != target) continue;
        rep.retries += r.retries;
        if (r.sent_s >= 0) {
            double lag = (r.sent_s - r.scheduled_s) * 1000;
            lags.push_back(lag);
            if (lag > 10) ++rep.late_sends;
        }
        bool in_window = r.scheduled_s >= rep.window_begin_s &&
                         (s.cooldown_s <= 0 || r.scheduled_s < rep.window_end_s);
        if (!in_window) continue;
        all.push_back(&r);
        per_class[size_t(r.klass)].push_back(&r);
        if (r.ok() && r.completion_tokens >= 0 && r.completion_tokens != int64_t(r.token_s.size()))
            ++rep.usage_mismatches;
    }
    rep.overall = compute_stats("overall", all, s);
    for (size_t c = 0; c < s.classes.size(); ++c)
        rep.classes.push_back(compute_stats(s.classes[c].name, per_class[c], s));
    auto lag = summarize(lags);
    rep.send_lag_p50_ms = lag.n ? lag.p50 : 0;
    rep.send_lag_p99_ms = lag.n ? lag.p99 : 0;
    rep.send_lag_max_ms = lag.n ? lag.max : 0;
    // The client could not keep the schedule: more than 1% of sends over 10 ms late.
    rep.client_saturated = s.arrival.kind != Arrival::Kind::kClosed && lag.n > 0 &&
                           double(rep.late_sends) > 0.01 * double(lag.n);

    // Per-second series over every request of this target (warm-up included, it is a time line).
    double horizon = run_duration_s;
    for (const auto& r : records) horizon = std::max(horizon, r.done_s);
    size_t secs = size_t(std::ceil(std::max(horizon, 0.0))) + 1;
    rep.series.assign(secs, SecondBucket{});
    std::vector<double> ttft_sum(secs, 0);
    std::vector<int64_t> ttft_n(secs, 0);
    auto at = [&](double t) { return std::min(secs - 1, size_t(std::max(0.0, t))); };
    for (const auto& r : records) {
        if (r.target != target || r.sent_s < 0) continue;
        ++rep.series[at(r.sent_s)].sent;
        if (r.done_s >= 0) {
            auto& b = rep.series[at(r.done_s)];
            if (r.ok()) {
                ++b.completed;
                b.output_tokens += r.output_tokens();
            } else {
                ++b.errors;
            }
        }
        if (r.ok() && r.first_token_s >= 0) {
            ttft_sum[at(r.first_token_s)] += r.ttft_ms();
            ++ttft_n[at(r.first_token_s)];
        }
        double end_t = r.done_s >= 0 ? r.done_s : horizon;
        for (size_t sec = size_t(std::ceil(r.sent_s)); sec < secs && double(sec) < end_t; ++sec)
            ++rep.series[sec].in_flight;
    }
    for (size_t i = 0; i < secs; ++i)
        rep.series[i].ttft_mean_ms = ttft_n[i] ? ttft_sum[i] / double(ttft_n[i]) : 0;
    evaluate_criteria(s, rep);
    return rep;
}

void evaluate_criteria(const Scenario& s, Report& rep) {
    rep.criteria.clear();
    bool all = true;
    for (const auto& c : s.criteria) {
        const Stats* st = &rep.overall;
        if (!c.klass.empty()) {
            st = nullptr;
            for (const auto& k : rep.classes) {
                if (k.name == c.klass) st = &k;
            }
        }
        CriterionResult r;
        r.criterion = c;
        r.value = st ? metric_value(*st, c.metric) : kNaN;
        if (std::isnan(r.value)) {
            r.pass = false;
        } else if (c.op == "<") {
            r.pass = r.value < c.threshold;
        } else if (c.op == "<=") {
            r.pass = r.value <= c.threshold;
        } else if (c.op == ">") {
            r.pass = r.value > c.threshold;
        } else {
            r.pass = r.value >= c.threshold;
        }
        all = all && r.pass;
        rep.criteria.push_back(r);
    }
    rep.verdict = s.criteria.empty() ? "none" : all ? "pass" : "fail";
}

const std::vector<std::string>& baseline_metrics() {
    static const std::vector<std::string> m = {
        "p50_ttft_ms",    "p99_ttft_ms",         "p50_tpot_ms", "p99_tpot_ms",
        "p50_itl_ms",     "p99_itl_ms",          "p50_e2e_ms",  "p99_e2e_ms",
        "requests_per_s", "output_tokens_per_s", "goodput_rps", "error_rate"};
    return m;
}

std::map<std::string, double> baseline_values(const Report& r) {
    std::map<std::string, double> out;
    for (const auto& m : baseline_metrics()) {
        double v = metric_value(r.overall, m);
        if (!std::isnan(v)) out[m] = v;
    }
    return out;
}

std::vector<MetricDelta> compare_runs(const std::vector<std::map<std::string, double>>& base,
                                      const std::vector<std::map<std::string, double>>& cur,
                                      double tolerance) {
    std::vector<MetricDelta> out;
    for (const auto& m : baseline_metrics()) {
        std::vector<double> b, c;
        for (const auto& run : base) {
            if (auto it = run.find(m); it != run.end()) b.push_back(it->second);
        }
        for (const auto& run : cur) {
            if (auto it = run.find(m); it != run.end()) c.push_back(it->second);
        }
        MetricDelta d;
        d.metric = m;
        if (b.empty() || c.empty()) {
            d.verdict = "n/a";
            out.push_back(d);
            continue;
        }
        d.base_mean = summarize(b).mean;
        d.cur_mean = summarize(c).mean;
        d.base_ci = ci95_half_width(b);
        d.cur_ci = ci95_half_width(c);
        const bool up_good = higher_is_better(m);
        if (m == "error_rate") {
            // Rates near zero: compare absolutely, one percentage point plus the noise.
            d.delta_rel = d.cur_mean - d.base_mean;
            d.noise_band = std::hypot(d.base_ci, d.cur_ci);
            double worse = d.delta_rel;
            d.verdict = worse > std::max(0.01, d.noise_band)    ? "regression"
                        : worse < -std::max(0.01, d.noise_band) ? "improved"
                                                                : "ok";
        } else if (d.base_mean == 0) {
            d.verdict = "n/a";
        } else {
            d.delta_rel = (d.cur_mean - d.base_mean) / std::fabs(d.base_mean);
            d.noise_band = std::hypot(d.base_ci, d.cur_ci) / std::fabs(d.base_mean);
            double worse = up_good ? -d.delta_rel : d.delta_rel;
            double band = std::max(tolerance, d.noise_band);
            d.verdict = worse > band ? "regression" : worse < -band ? "improved" : "ok";
        }
        out.push_back(d);
    }
    return out;
}

}  // namespace pagoda::bench
