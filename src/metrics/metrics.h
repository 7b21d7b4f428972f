#pragma once
// Metric primitives for /metrics: a lock-free histogram with fixed upper bounds, and a
// writer of the Prometheus text exposition format (HELP/TYPE lines, labels, escaping).
// Histograms are observed from any thread; rendering reads them without locks.

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pagoda::metrics {

class Histogram {
  public:
    explicit Histogram(std::vector<double> upper_bounds);
    void observe(double v);
    // Every value of `vs`, counted first and added with one atomic add per bucket touched
    // (a request's inter-token gaps: one call instead of one per token).
    void observe_all(std::span<const double> vs);
    const std::vector<double>& bounds() const { return bounds_; }
    // Cumulative counts per bound, then +Inf; the sum; the count.
    struct Snapshot {
        std::vector<uint64_t> cumulative;
        double sum = 0;
        uint64_t count = 0;
    };
    Snapshot snapshot() const;

  private:
    size_t bucket(double v) const;  // the first bound >= v (+Inf: bounds_.size())
    std::vector<double> bounds_;
    std::vector<std::atomic<uint64_t>> counts_;  // per bucket (not cumulative), last = +Inf
    std::atomic<uint64_t> sum_micro_{0};         // sum in 1e-6 units (values are seconds or counts)
    std::atomic<uint64_t> count_{0};
};

using Labels = std::vector<std::pair<std::string, std::string>>;

// Builds exposition text; each family's HELP/TYPE is written once, before its samples.
class TextWriter {
  public:
    void family(std::string_view name, std::string_view type, std::string_view help);
    void sample(std::string_view name, const Labels& labels, double value);
    void histogram(std::string_view name, const Labels& labels, const Histogram& h);
    const std::string& text() const { return out_; }

  private:
    std::string out_;
};

std::string escape_label(std::string_view v);

}  // namespace pagoda::metrics
