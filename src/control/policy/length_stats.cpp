// The implementation of control/policy/length_stats.h (the contract is there).
#include "control/policy/length_stats.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace pagoda::control {

int LengthHistogram::bucket_of(int64_t len) {
    if (len < 8) return 0;
    const int octave = int(std::bit_width(uint64_t(len))) - 1;  // 3 ..
    if (octave >= 20) return kBuckets - 1;
    const int sub = int((len >> (octave - 2)) & 3);
    return 1 + (octave - 3) * 4 + sub;
}

int64_t LengthHistogram::bucket_upper(int b) {
    if (b == 0) return 7;
    if (b >= kBuckets - 1) return INT64_MAX;
    const int octave = 3 + (b - 1) / 4;
    const int sub = (b - 1) % 4;
    return (int64_t(4 + sub + 1) << (octave - 2)) - 1;
}

void LengthHistogram::add(int64_t len) {
    len = std::max<int64_t>(len, 0);
    const int b = bucket_of(len);
    ++count_[size_t(b)];
    sum_[size_t(b)] += double(len);
    ++total_;
}

void LengthHistogram::merge(const LengthHistogram& o) {
    for (int b = 0; b < kBuckets; ++b) {
        count_[size_t(b)] += o.count_[size_t(b)];
        sum_[size_t(b)] += o.sum_[size_t(b)];
    }
    total_ += o.total_;
}

double LengthHistogram::mean() const {
    if (total_ == 0) return 0;
    double s = 0;
    for (double x : sum_) s += x;
    return s / double(total_);
}

double LengthHistogram::bucket_mean(int b) const {
    const int64_t n = count_[size_t(b)];
    return n == 0 ? 0.0 : sum_[size_t(b)] / double(n);
}

int64_t LengthHistogram::quantile(double q) const {
    if (total_ == 0) return 0;
    const double want = std::clamp(q, 0.0, 1.0) * double(total_);
    int64_t seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
        seen += count_[size_t(b)];
        if (double(seen) >= want && count_[size_t(b)] > 0) {
            // The last bucket has no upper edge: its mean is the best bound there is.
            return b == kBuckets - 1 ? int64_t(std::ceil(bucket_mean(b))) : bucket_upper(b);
        }
    }
    return bucket_upper(kBuckets - 2);
}

LengthHistogram::Part LengthHistogram::part(int64_t lo, int64_t hi) const {
    Part p;
    double s = 0;
    for (int b = 0; b < kBuckets; ++b) {
        const double m = bucket_mean(b);
        if (count_[size_t(b)] == 0 || m < double(lo) || m > double(hi)) continue;
        p.count += count_[size_t(b)];
        s += sum_[size_t(b)];
    }
    p.mean = p.count == 0 ? 0.0 : s / double(p.count);
    return p;
}

json LengthHistogram::to_json() const {
    json buckets = json::object();
    for (int b = 0; b < kBuckets; ++b) {
        if (count_[size_t(b)] == 0) continue;
        buckets[std::to_string(b)] = {count_[size_t(b)], sum_[size_t(b)]};
    }
    return {{"buckets", buckets}};
}

Result<LengthHistogram> LengthHistogram::from_json(const json& j) {
    LengthHistogram h;
    if (!j.is_object() || !j.contains("buckets") || !j["buckets"].is_object()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "length histogram: expected {{\"buckets\": {{...}}}}");
    }
    for (const auto& [key, v] : j["buckets"].items()) {
        int b = -1;
        try {
            b = std::stoi(key);
        } catch (const std::exception&) {
        }
        if (b < 0 || b >= kBuckets || !v.is_array() || v.size() != 2 || !v[0].is_number_integer() ||
            !v[1].is_number() || v[0].get<int64_t>() < 0) {
            return make_error(ErrorCode::kInvalidArgument,
                              "length histogram: bad bucket \"{}\" (want 0..{} -> [count, sum])",
                              key, kBuckets - 1);
        }
        h.count_[size_t(b)] = v[0].get<int64_t>();
        h.sum_[size_t(b)] = v[1].get<double>();
        h.total_ += h.count_[size_t(b)];
    }
    return h;
}

int ContextLengthStats::hour_of(int64_t unix_ms) {
    const int64_t h = (unix_ms / 3'600'000) % 24;
    return int(h < 0 ? h + 24 : h);
}

void ContextLengthStats::add(int64_t len, int64_t unix_ms) {
    all_.add(len);
    by_hour_[size_t(hour_of(unix_ms))].add(len);
    ema_ = all_.count() == 1 ? double(len) : kEmaAlpha * double(len) + (1 - kEmaAlpha) * ema_;
}

const LengthHistogram& ContextLengthStats::window_for(int64_t unix_ms, int64_t min_samples,
                                                      std::string* window) const {
    const int h = hour_of(unix_ms);
    const LengthHistogram& hist = by_hour_[size_t(h)];
    const bool hourly = hist.count() >= min_samples;
    if (window != nullptr) {
        *window = hourly ? "hour " + std::to_string(h) + " UTC" : "all time";
    }
    return hourly ? hist : all_;
}

json ContextLengthStats::to_json() const {
    json hours = json::object();
    for (int h = 0; h < 24; ++h) {
        if (by_hour_[size_t(h)].count() > 0)
            hours[std::to_string(h)] = by_hour_[size_t(h)].to_json();
    }
    return {{"all", all_.to_json()}, {"by_hour_utc", hours}, {"ema", ema_}};
}

Result<ContextLengthStats> ContextLengthStats::from_json(const json& j) {
    ContextLengthStats s;
    if (!j.is_object() || !j.contains("all") || !j.contains("ema") || !j["ema"].is_number()) {
        return make_error(
            ErrorCode::kInvalidArgument,
            "context-length statistics: expected {{\"all\", \"by_hour_utc\", \"ema\"}}");
    }
    PAGODA_ASSIGN_OR_RETURN(s.all_, LengthHistogram::from_json(j["all"]));
    s.ema_ = j["ema"].get<double>();
    if (j.contains("by_hour_utc") && j["by_hour_utc"].is_object()) {
        for (const auto& [key, v] : j["by_hour_utc"].items()) {
            int h = -1;
            try {
                h = std::stoi(key);
            } catch (const std::exception&) {
            }
            if (h < 0 || h > 23) {
                return make_error(ErrorCode::kInvalidArgument,
                                  "context-length statistics: bad hour \"{}\" (want 0..23)", key);
            }
            PAGODA_ASSIGN_OR_RETURN(s.by_hour_[size_t(h)], LengthHistogram::from_json(v));
        }
    }
    return s;
}

}  // namespace pagoda::control
