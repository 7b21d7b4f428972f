// WarmPolicy: the implementation (the contract is in control/warm/warm_policy.h).
#include "control/warm/warm_policy.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace pagoda::control {

namespace {

Result<std::vector<int64_t>> parse_list(const std::string& s, size_t n, const char* what) {
    std::vector<int64_t> out;
    size_t pos = 0;
    while (pos <= s.size()) {
        const size_t comma = std::min(s.find(',', pos), s.size());
        const std::string item = s.substr(pos, comma - pos);
        char* end = nullptr;
        const long long v = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0') {
            return make_error(ErrorCode::kInvalidArgument, "{}: '{}' is not a list of {} integers",
                              what, s, n);
        }
        out.push_back(v);
        pos = comma + 1;
    }
    if (out.size() != n) {
        return make_error(ErrorCode::kInvalidArgument, "{}: '{}' has {} values, expected {}", what,
                          s, out.size(), n);
    }
    return out;
}

}  // namespace

const char* warm_level_name(WarmLevel l) {
    switch (l) {
        case WarmLevel::kOff: return "off";
        case WarmLevel::kLow: return "low";
        case WarmLevel::kMedium: return "medium";
        case WarmLevel::kHigh: return "high";
        case WarmLevel::kFull: return "full";
    }
    return "off";
}

Result<WarmLevel> parse_warm_level(const std::string& s) {
    for (WarmLevel l : {WarmLevel::kOff, WarmLevel::kLow, WarmLevel::kMedium, WarmLevel::kHigh,
                        WarmLevel::kFull}) {
        if (s == warm_level_name(l)) return l;
    }
    return make_error(ErrorCode::kInvalidArgument,
                      "warm level '{}' is not one of: off, low, medium, high, full", s);
}

Status WarmPolicyOptions::validate() const {
    const auto& t = thresholds;
    if (t[0] < 0 || t[1] <= t[0] || t[2] <= t[1]) {
        return make_error(ErrorCode::kInvalidArgument,
                          "warm thresholds must be increasing and >= 0 (got {},{},{}; e.g. "
                          "5,10,20)",
                          t[0], t[1], t[2]);
    }
    if (!(seconds_per_request > 0 && seconds_per_request <= 60)) {
        return make_error(ErrorCode::kInvalidArgument,
                          "seconds per waiting request must be in (0, 60] (got {})",
                          seconds_per_request);
    }
    if (!(max_window_s >= 1 && max_window_s <= 86400)) {
        return make_error(ErrorCode::kInvalidArgument,
                          "the longest warm window must be in [1 s, 1 d] (got {} s)", max_window_s);
    }
    for (int64_t s : spin_ms) {
        if (s < -1 || s > 3'600'000) {
            return make_error(ErrorCode::kInvalidArgument,
                              "a warm level's spin must be -1 (its whole window) or 0..3600000 "
                              "ms (got {})",
                              s);
        }
    }
    for (int64_t p : pass_ms) {
        if (p != 0 && (p < 10 || p > 60'000)) {
            return make_error(ErrorCode::kInvalidArgument,
                              "a warm level's pass interval must be 0 (no passes) or 10..60000 "
                              "ms (got {})",
                              p);
        }
    }
    if (pass_ms[0] != 0) {
        return make_error(ErrorCode::kInvalidArgument,
                          "level off must not run warm passes (its interval is {} ms; use 0)",
                          pass_ms[0]);
    }
    if (spin_ms[0] != 0) {
        return make_error(ErrorCode::kInvalidArgument,
                          "level off must not spin (its spin is {} ms; use 0)", spin_ms[0]);
    }
    return ok_status();
}

Result<std::array<int64_t, 3>> parse_thresholds(const std::string& s) {
    PAGODA_ASSIGN_OR_RETURN(auto v, parse_list(s, 3, "--warm-thresholds"));
    return std::array<int64_t, 3>{v[0], v[1], v[2]};
}

Result<std::array<int64_t, 4>> parse_spins(const std::string& s) {
    PAGODA_ASSIGN_OR_RETURN(auto v, parse_list(s, 4, "--warm-spin-ms"));
    return std::array<int64_t, 4>{v[0], v[1], v[2], v[3]};
}

Result<std::array<int64_t, 4>> parse_passes(const std::string& s) {
    PAGODA_ASSIGN_OR_RETURN(auto v, parse_list(s, 4, "--warm-pass-ms"));
    return std::array<int64_t, 4>{v[0], v[1], v[2], v[3]};
}

int64_t WarmPolicy::window_ms(int64_t waiting) const {
    const double s = std::min(o_.max_window_s, o_.seconds_per_request * double(waiting));
    return int64_t(std::llround(s * 1000.0));
}

WarmLevel WarmPolicy::level_for(int64_t waiting) const {
    WarmLevel l = WarmLevel::kOff;
    for (int i = 0; i < 3; ++i) {
        if (waiting > o_.thresholds[size_t(i)]) l = WarmLevel(i + 1);
    }
    return l;
}

std::optional<WarmChange> WarmPolicy::observe(int64_t waiting, int64_t now_ms) {
    if (suspended_) return std::nullopt;
    const WarmLevel want = level_for(waiting);
    const WarmLevel was = level_;
    std::string reason;
    if (want != WarmLevel::kOff && want >= level_) {
        until_ms_ = std::max(until_ms_, now_ms + window_ms(waiting));
        level_ = want;
        reason = fmt::format("queue {} > {}", waiting, o_.thresholds[size_t(int(want) - 1)]);
    } else if (level_ != WarmLevel::kOff && now_ms >= until_ms_) {
        level_ = want;
        until_ms_ = want == WarmLevel::kOff ? 0 : now_ms + window_ms(waiting);
        reason = "window ended";
    }
    if (level_ == was) return std::nullopt;
    return WarmChange{was, level_, until_ms_, reason};
}

std::optional<WarmChange> WarmPolicy::suspend(bool on, const std::string& why, int64_t now_ms) {
    if (on == suspended_) return std::nullopt;
    suspended_ = on;
    if (!on) return WarmChange{level_, level_, until_ms_, "resumed: " + why};
    const WarmChange c{level_, WarmLevel::kOff, 0, "suspended: " + why};
    level_ = WarmLevel::kOff;
    until_ms_ = 0;
    return c;
}

std::optional<WarmChange> WarmPolicy::raise(WarmLevel l, int64_t until_ms, const std::string& why) {
    if (suspended_ || l == WarmLevel::kOff || l < level_) return std::nullopt;
    until_ms_ = std::max(until_ms_, until_ms);
    if (l == level_) return std::nullopt;
    const WarmChange c{level_, l, until_ms_, why};
    level_ = l;
    return c;
}

WarmChange WarmPolicy::set_manual(WarmLevel l, int64_t duration_ms, int64_t now_ms) {
    const WarmChange c{level_, l, l == WarmLevel::kOff ? 0 : now_ms + duration_ms, "manual"};
    level_ = l;
    until_ms_ = c.until_ms;
    return c;
}

// The index of a level in the per-level tables: full runs as high.
size_t WarmPolicy::table_index() const { return size_t(std::min(int(level_), 3)); }

std::chrono::microseconds WarmPolicy::spin_budget(int64_t now_ms) const {
    const int64_t ms = o_.spin_ms[table_index()];
    if (level_ == WarmLevel::kOff || suspended_) return std::chrono::microseconds(0);
    if (ms < 0) return std::chrono::microseconds(std::max<int64_t>(0, until_ms_ - now_ms) * 1000);
    return std::chrono::microseconds(ms * 1000);
}

std::chrono::milliseconds WarmPolicy::pass_interval() const {
    return std::chrono::milliseconds(o_.pass_ms[table_index()]);
}

nlohmann::json WarmPolicy::to_json(int64_t now_ms) const {
    return {{"level", warm_level_name(level_)},
            {"until_ms", until_ms_},
            {"remaining_s", double(std::max<int64_t>(0, until_ms_ - now_ms)) / 1000.0},
            {"suspended", suspended_},
            {"spin_budget_ms", double(spin_budget(now_ms).count()) / 1000.0},
            {"thresholds", o_.thresholds},
            {"seconds_per_request", o_.seconds_per_request},
            {"max_window_s", o_.max_window_s},
            {"spin_ms", o_.spin_ms},
            {"pass_interval_ms", pass_interval().count()},
            {"pass_ms", o_.pass_ms}};
}

}  // namespace pagoda::control
