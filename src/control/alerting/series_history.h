#pragma once
// SeriesHistory: a window of the replica's own scrapes (parsed /metrics text), kept for the
// alert rules: the current value of a selector, a counter's increase over a window
// (resets handled), per-series averages and extremes, and histogram bucket increases.
// Only the metric names the rules use are kept. Not thread-safe: the control tick owns it.

#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "metrics/prom_text.h"

namespace pagoda::control {

struct LabelMatcher {
    std::string key, value;
    bool equal = true;  // = or !=
};

struct Selector {
    std::string name;
    std::vector<LabelMatcher> matchers;
    bool matches(const metrics::Sample& s) const;
};

enum class Over { kAvg, kMax, kMin };

class SeriesHistory {
  public:
    explicit SeriesHistory(int64_t keep_ms = 3'600'000) : keep_ms_(keep_ms) {}
    // Keep only these names (a histogram's base name keeps its _bucket, _sum and _count);
    // empty keeps everything.
    void set_filter(std::set<std::string> names) { filter_ = std::move(names); }
    void set_keep_ms(int64_t keep_ms) { keep_ms_ = keep_ms; }
    void add(int64_t at_ms, const std::vector<metrics::Sample>& samples);
    void clear() { snaps_.clear(); }
    size_t size() const { return snaps_.size(); }

    // The sum over matching series in the newest snapshot; nullopt when none matches.
    std::optional<double> latest(const Selector& sel) const;
    // The summed increase of matching counters over [now - window, now]; a counter that goes
    // down restarted from 0, one that appears inside the window started at 0. nullopt with
    // fewer than two snapshots in the window or no matching series.
    std::optional<double> increase(const Selector& sel, int64_t window_ms, int64_t now_ms) const;
    // increase() over the time between the window's first and last snapshot.
    std::optional<double> rate(const Selector& sel, int64_t window_ms, int64_t now_ms) const;
    // Per series average, maximum or minimum over the window, summed over series.
    std::optional<double> over_time(const Selector& sel, Over how, int64_t window_ms,
                                    int64_t now_ms) const;
    // Increases of `<name>_bucket` series over the window, summed per `le` bound (ascending,
    // +Inf last); empty when there is no data.
    std::vector<std::pair<double, double>> bucket_increases(const Selector& hist, int64_t window_ms,
                                                            int64_t now_ms) const;
    // The matching series' values in the window, for diagnostic reports:
    // [{"series": "name{k=v}", "points": [[at_ms, value], ...]}].
    nlohmann::json dump(const Selector& sel, int64_t window_ms, int64_t now_ms) const;

  private:
    struct Snapshot {
        int64_t at_ms = 0;
        std::vector<metrics::Sample> samples;
        std::vector<std::string> keys;  // series identity per sample
    };
    // Matching series in the window: key -> (at_ms, value) in time order.
    using Series = std::map<std::string, std::vector<std::pair<int64_t, double>>>;
    Series collect(const Selector& sel, int64_t window_ms, int64_t now_ms) const;
    size_t first_in_window(int64_t window_ms, int64_t now_ms) const;
    bool keep(const std::string& name) const;

    int64_t keep_ms_;
    std::set<std::string> filter_;
    std::deque<Snapshot> snaps_;
};

// The increase of one counter series given its points, the window's first snapshot time
// (a series starting later started at 0).
double counter_increase(const std::vector<std::pair<int64_t, double>>& points, int64_t first_at_ms);

// Prometheus's histogram_quantile over cumulative bucket counts (ascending bounds, +Inf
// last): linear inside the bucket; the highest finite bound when the rank falls in +Inf.
std::optional<double> histogram_quantile(double q,
                                         const std::vector<std::pair<double, double>>& buckets);

}  // namespace pagoda::control
