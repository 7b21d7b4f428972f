// The implementation of router/judges.h (the contract is there).
#include "router/judges.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "metrics/significance.h"

namespace pagoda::router {

using json = nlohmann::json;

double quantile(std::vector<double> v, double q) {
    if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
    std::sort(v.begin(), v.end());
    const double pos = q * double(v.size() - 1);
    const size_t lo = size_t(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

namespace {

// Latencies of the successful samples: metric "ttft" or "e2e", class "short", "long", "all".
std::vector<double> values(const std::vector<ArmSample>& s, const std::string& metric,
                           const std::string& klass) {
    std::vector<double> out;
    for (const auto& a : s) {
        if (!a.ok) continue;
        if (klass != "all" && a.long_prompt != (klass == "long")) continue;
        const double v = metric == "ttft" ? a.ttft_s : a.e2e_s;
        if (v >= 0) out.push_back(v);
    }
    return out;
}

double error_rate(const std::vector<ArmSample>& s) {
    if (s.empty()) return 0;
    double bad = 0;
    for (const auto& a : s) bad += a.ok ? 0 : 1;
    return bad / double(s.size());
}

}  // namespace

WindowResult compare_window(const std::vector<ArmSample>& source,
                            const std::vector<ArmSample>& target, const BreakerPolicy& p) {
    WindowResult r;
    r.evidence = json::object();
    bool compared = false;
    for (const char* metric : {"ttft", "e2e"}) {
        for (const char* klass : {"short", "long"}) {
            const auto a = values(source, metric, klass);
            const auto b = values(target, metric, klass);
            if (int(a.size()) < p.min_samples || int(b.size()) < p.min_samples) continue;
            compared = true;
            const double sp = quantile(a, 0.99), tp = quantile(b, 0.99);
            const double ratio = sp > 0 ? tp / sp : (tp > 0 ? INFINITY : 1);
            const std::string key = fmt::format("{}/{}", metric, klass);
            r.evidence[key] = {{"source_p99_s", sp},
                               {"target_p99_s", tp},
                               {"ratio", ratio},
                               {"source_samples", a.size()},
                               {"target_samples", b.size()}};
            if (ratio > 1 + p.threshold && ratio > r.worst_ratio) {
                r.worst = key;
                r.worst_ratio = ratio;
            }
        }
    }
    r.verdict = !compared         ? WindowVerdict::kNoData
                : r.worst.empty() ? WindowVerdict::kWithin
                                  : WindowVerdict::kAbove;
    return r;
}

const char* breaker_action_name(BreakerAction a) {
    switch (a) {
        case BreakerAction::kNone: return "none";
        case BreakerAction::kPause: return "pause";
        case BreakerAction::kResume: return "resume";
        case BreakerAction::kRollback: return "rollback";
    }
    return "none";
}

BreakerAction Breaker::feed(const WindowResult& w) {
    if (w.verdict == WindowVerdict::kNoData) return BreakerAction::kNone;
    if (w.verdict == WindowVerdict::kAbove) {
        ++above_;
        if (above_ >= p_.rollback_windows) {
            above_ = 0;
            paused_ = false;
            return BreakerAction::kRollback;
        }
        if (!paused_) {
            paused_ = true;
            return BreakerAction::kPause;
        }
        return BreakerAction::kNone;
    }
    above_ = 0;
    if (paused_) {
        paused_ = false;
        return BreakerAction::kResume;
    }
    return BreakerAction::kNone;
}

namespace {

json compare_metric(const std::vector<double>& base, const std::vector<double>& cand,
                    double tolerance) {
    const double mb = quantile(base, 0.5), mc = quantile(cand, 0.5);
    double mean = 0;
    for (double x : base) mean += x;
    mean = base.empty() ? 0 : mean / double(base.size());
    const double band = mean > 0 ? metrics::ci95_half_width(base) / mean : 0;
    const auto mw = metrics::mann_whitney(cand, base);
    return {{"baseline_p50_s", mb},
            {"candidate_p50_s", mc},
            {"ratio", mb > 0 ? mc / mb : 1.0},
            {"baseline_p99_s", quantile(base, 0.99)},
            {"candidate_p99_s", quantile(cand, 0.99)},
            {"noise_band", band},
            {"tolerance", std::max(tolerance, band)},
            {"mann_whitney_p", mw.p_value},
            {"baseline_samples", base.size()},
            {"candidate_samples", cand.size()}};
}

}  // namespace

CanaryVerdict judge_canary(const std::vector<ArmSample>& baseline,
                           const std::vector<ArmSample>& candidate, const CanaryPolicy& p) {
    CanaryVerdict v;
    const double eb = error_rate(baseline), ec = error_rate(candidate);
    v.evidence = {{"baseline_requests", baseline.size()},
                  {"candidate_requests", candidate.size()},
                  {"baseline_error_rate", eb},
                  {"candidate_error_rate", ec}};
    if (int(candidate.size()) < p.min_samples || int(baseline.size()) < p.min_samples) {
        v.verdict = "wait";
        v.reason = fmt::format("{} candidate and {} baseline requests; a verdict needs {} each",
                               candidate.size(), baseline.size(), p.min_samples);
        return v;
    }
    if (ec > eb + p.max_error_increase) {
        v.verdict = "rollback";
        v.reason = fmt::format("candidate error rate {:.3f} > baseline {:.3f} + {}", ec, eb,
                               p.max_error_increase);
        return v;
    }
    for (const char* metric : {"ttft", "e2e"}) {
        const auto b = values(baseline, metric, "all"), c = values(candidate, metric, "all");
        if (!b.empty() && !c.empty()) v.evidence[metric] = compare_metric(b, c, p.tolerance);
    }
    bool undecided = false;
    for (const char* metric : {"ttft", "e2e"}) {
        if (!v.evidence.contains(metric)) continue;
        const json& m = v.evidence[metric];
        const bool slower = m["ratio"].get<double>() > 1 + m["tolerance"].get<double>();
        if (slower && m["mann_whitney_p"].get<double>() < p.alpha) {
            v.verdict = "rollback";
            v.reason =
                fmt::format("{} p50 is {:.0f}% of the baseline (p = {:.2g})", metric,
                            m["ratio"].get<double>() * 100, m["mann_whitney_p"].get<double>());
            return v;
        }
        undecided = undecided || slower;
    }
    if (undecided && int(candidate.size()) < p.max_samples) {
        v.verdict = "wait";
        v.reason = "slower than the tolerance but not significant yet";
        return v;
    }
    v.verdict = undecided ? "rollback" : "promote";
    v.reason = undecided ? fmt::format("still slower without significance after {} requests",
                                       candidate.size())
                         : "within the tolerance of the baseline on TTFT and end-to-end latency";
    return v;
}

}  // namespace pagoda::router
