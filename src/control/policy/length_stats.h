#pragma once
// Context-length statistics of finished requests (prompt + output tokens): an all-time
// histogram, one histogram per UTC hour of day (the day/night shape of the traffic), and an
// exponential moving average of recent lengths. The block-size policies read them; the
// control plane persists them in the state database and loads them at start. Not
// thread-safe: its owner serialises access.

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "base/result.h"

namespace pagoda::control {

using json = nlohmann::json;

// Log-spaced buckets, four per power of two: bucket 0 holds lengths below 8; lengths of
// 2^20 tokens and more share the last bucket. Each bucket keeps its count and the sum of
// its lengths, so its mean is exact.
class LengthHistogram {
  public:
    static constexpr int kBuckets = 1 + (20 - 3) * 4 + 1;
    static int bucket_of(int64_t len);
    static int64_t bucket_upper(int b);  // largest length of bucket b (kBuckets-1: unbounded)

    void add(int64_t len);
    void merge(const LengthHistogram& o);
    int64_t count() const { return total_; }
    double mean() const;
    // Length at quantile q in (0, 1]: the upper edge of the bucket that reaches it (a bound
    // at most 19% above the true value). 0 when empty.
    int64_t quantile(double q) const;
    int64_t bucket_count(int b) const { return count_[size_t(b)]; }
    double bucket_mean(int b) const;
    // Mean of the lengths in [lo, hi] by whole buckets, with their share of the count.
    struct Part {
        int64_t count = 0;
        double mean = 0;
    };
    Part part(int64_t lo, int64_t hi) const;

    json to_json() const;  // {"count": [...], "sum": [...]}, sparse
    static Result<LengthHistogram> from_json(const json& j);
    bool operator==(const LengthHistogram&) const = default;

  private:
    std::array<int64_t, kBuckets> count_{};
    std::array<double, kBuckets> sum_{};
    int64_t total_ = 0;
};

class ContextLengthStats {
  public:
    static constexpr double kEmaAlpha = 0.05;  // weight of each new length

    void add(int64_t len, int64_t unix_ms);
    const LengthHistogram& all() const { return all_; }
    const LengthHistogram& hour(int h) const { return by_hour_[size_t(h)]; }
    double ema() const { return ema_; }
    // What a decision at `unix_ms` looks at: that hour of day's histogram when it holds at
    // least `min_samples` lengths, else the all-time one. `window` names it.
    const LengthHistogram& window_for(int64_t unix_ms, int64_t min_samples,
                                      std::string* window = nullptr) const;
    static int hour_of(int64_t unix_ms);

    json to_json() const;
    static Result<ContextLengthStats> from_json(const json& j);
    bool operator==(const ContextLengthStats&) const = default;

  private:
    LengthHistogram all_;
    std::array<LengthHistogram, 24> by_hour_{};
    double ema_ = 0;
};

}  // namespace pagoda::control
