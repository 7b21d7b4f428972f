// SeriesHistory: the implementation (the contract is in control/alerting/series_history.h).
#include "control/alerting/series_history.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace pagoda::control {

namespace {

std::string series_key(const metrics::Sample& s) {
    metrics::Labels l = s.labels;
    std::sort(l.begin(), l.end());
    std::string k = s.name + "{";
    for (const auto& [a, b] : l) k += a + "=\"" + b + "\",";
    return k + "}";
}

std::string base_name(const std::string& n) {
    for (const char* suffix : {"_bucket", "_count", "_sum"}) {
        const size_t len = std::char_traits<char>::length(suffix);
        if (n.size() > len && n.compare(n.size() - len, len, suffix) == 0) {
            return n.substr(0, n.size() - len);
        }
    }
    return n;
}

double parse_le(std::string_view le) {
    if (le == "+Inf" || le == "Inf") return HUGE_VAL;
    return std::strtod(std::string(le).c_str(), nullptr);
}

}  // namespace

bool Selector::matches(const metrics::Sample& s) const {
    if (s.name != name) return false;
    for (const LabelMatcher& m : matchers) {
        if ((s.label(m.key) == m.value) != m.equal) return false;
    }
    return true;
}

bool SeriesHistory::keep(const std::string& name) const {
    return filter_.empty() || filter_.count(name) > 0 || filter_.count(base_name(name)) > 0;
}

void SeriesHistory::add(int64_t at_ms, const std::vector<metrics::Sample>& samples) {
    Snapshot s;
    s.at_ms = at_ms;
    for (const metrics::Sample& smp : samples) {
        if (!keep(smp.name)) continue;
        s.keys.push_back(series_key(smp));
        s.samples.push_back(smp);
    }
    snaps_.push_back(std::move(s));
    while (!snaps_.empty() && snaps_.front().at_ms < at_ms - keep_ms_) snaps_.pop_front();
}

size_t SeriesHistory::first_in_window(int64_t window_ms, int64_t now_ms) const {
    size_t i = 0;
    while (i < snaps_.size() && snaps_[i].at_ms < now_ms - window_ms) ++i;
    return i;
}

SeriesHistory::Series SeriesHistory::collect(const Selector& sel, int64_t window_ms,
                                             int64_t now_ms) const {
    Series out;
    for (size_t i = first_in_window(window_ms, now_ms); i < snaps_.size(); ++i) {
        const Snapshot& s = snaps_[i];
        if (s.at_ms > now_ms) break;
        for (size_t j = 0; j < s.samples.size(); ++j) {
            if (sel.matches(s.samples[j])) out[s.keys[j]].emplace_back(s.at_ms, s.samples[j].value);
        }
    }
    return out;
}

std::optional<double> SeriesHistory::latest(const Selector& sel) const {
    if (snaps_.empty()) return std::nullopt;
    std::optional<double> sum;
    for (const metrics::Sample& s : snaps_.back().samples) {
        if (sel.matches(s)) sum = sum.value_or(0) + s.value;
    }
    return sum;
}

double counter_increase(const std::vector<std::pair<int64_t, double>>& points,
                        int64_t first_at_ms) {
    if (points.empty()) return 0;
    double inc = points.front().first > first_at_ms ? points.front().second : 0;
    for (size_t i = 1; i < points.size(); ++i) {
        const double d = points[i].second - points[i - 1].second;
        inc += d >= 0 ? d : points[i].second;  // a reset: the counter restarted from 0
    }
    return inc;
}

std::optional<double> SeriesHistory::increase(const Selector& sel, int64_t window_ms,
                                              int64_t now_ms) const {
    const size_t first = first_in_window(window_ms, now_ms);
    if (snaps_.size() < first + 2) return std::nullopt;
    const Series series = collect(sel, window_ms, now_ms);
    if (series.empty()) return std::nullopt;
    double sum = 0;
    for (const auto& [key, points] : series) sum += counter_increase(points, snaps_[first].at_ms);
    return sum;
}

std::optional<double> SeriesHistory::rate(const Selector& sel, int64_t window_ms,
                                          int64_t now_ms) const {
    const size_t first = first_in_window(window_ms, now_ms);
    auto inc = increase(sel, window_ms, now_ms);
    if (!inc) return std::nullopt;
    size_t last = snaps_.size() - 1;
    while (last > first && snaps_[last].at_ms > now_ms) --last;
    const double span_s = double(snaps_[last].at_ms - snaps_[first].at_ms) / 1000.0;
    if (span_s <= 0) return std::nullopt;
    return *inc / span_s;
}

std::optional<double> SeriesHistory::over_time(const Selector& sel, Over how, int64_t window_ms,
                                               int64_t now_ms) const {
    const Series series = collect(sel, window_ms, now_ms);
    if (series.empty()) return std::nullopt;
    double sum = 0;
    for (const auto& [key, points] : series) {
        double acc = how == Over::kAvg ? 0 : points.front().second;
        for (const auto& [at, v] : points) {
            if (how == Over::kAvg) acc += v;
            if (how == Over::kMax) acc = std::max(acc, v);
            if (how == Over::kMin) acc = std::min(acc, v);
        }
        sum += how == Over::kAvg ? acc / double(points.size()) : acc;
    }
    return sum;
}

std::vector<std::pair<double, double>> SeriesHistory::bucket_increases(const Selector& hist,
                                                                       int64_t window_ms,
                                                                       int64_t now_ms) const {
    const size_t first = first_in_window(window_ms, now_ms);
    if (snaps_.size() < first + 2) return {};
    Selector b = hist;
    b.name = hist.name + "_bucket";
    // Each series key carries its le; sum the increases per le.
    std::map<double, double> by_le;
    for (size_t i = first; i < snaps_.size(); ++i) {
        const Snapshot& s = snaps_[i];
        for (const metrics::Sample& smp : s.samples) {
            if (b.matches(smp)) by_le.emplace(parse_le(smp.label("le")), 0.0);
        }
    }
    if (by_le.empty()) return {};
    const Series series = collect(b, window_ms, now_ms);
    for (const auto& [key, points] : series) {
        const size_t at = key.find("le=\"");
        if (at == std::string::npos) continue;
        const size_t end = key.find('"', at + 4);
        by_le[parse_le(std::string_view(key).substr(at + 4, end - at - 4))] +=
            counter_increase(points, snaps_[first].at_ms);
    }
    return {by_le.begin(), by_le.end()};
}

nlohmann::json SeriesHistory::dump(const Selector& sel, int64_t window_ms, int64_t now_ms) const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [key, points] : collect(sel, window_ms, now_ms)) {
        nlohmann::json pts = nlohmann::json::array();
        for (const auto& [at, v] : points) pts.push_back({at, std::isfinite(v) ? v : 0.0});
        out.push_back({{"series", key}, {"points", pts}});
    }
    return out;
}

std::optional<double> histogram_quantile(double q,
                                         const std::vector<std::pair<double, double>>& buckets) {
    if (buckets.empty() || !std::isinf(buckets.back().first)) return std::nullopt;
    const double total = buckets.back().second;
    if (total <= 0) return std::nullopt;
    if (q <= 0) return 0.0;
    if (q >= 1) q = 1;
    const double rank = q * total;
    double prev_bound = 0, prev_count = 0;
    for (size_t i = 0; i < buckets.size(); ++i) {
        const auto [bound, count] = buckets[i];
        if (count >= rank) {
            if (std::isinf(bound)) return i == 0 ? std::nullopt : std::optional(prev_bound);
            if (count == prev_count) return bound;
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count);
        }
        prev_bound = bound;
        prev_count = count;
    }
    return prev_bound;
}

}  // namespace pagoda::control
