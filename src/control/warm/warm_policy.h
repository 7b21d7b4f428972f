#pragma once
// WarmPolicy: the dynamic warmup tier. When the waiting queue exceeds the thresholds
// (5 / 10 / 20 requests by default) the replica enters warm level low / medium / high for
// min(max_window, seconds_per_request x queue depth) (the published policy); a higher level
// replaces a lower one at once, a lower one waits for the window to end, and the window is
// extended while the queue stays deep. What a level does is the engine's idle spin
// (Engine::set_idle_spin): how long the compute pool keeps spinning after it runs out of
// work, so the next request does not pay the CPUs' wake-up. `off` parks at once and costs
// nothing idle. Suspended (off) while the replica sheds load or a critical alert fires.
// Not thread-safe: the control tick owns it.

#include <array>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/result.h"

namespace pagoda::control {

// kFull: high's spin and passes after a full warmup (every batch bucket's kernels, engine
// rounds, the KV pool faulted in: POST /admin/warmup {"level": "full"}, the fleet's pre-warm).
enum class WarmLevel { kOff = 0, kLow = 1, kMedium = 2, kHigh = 3, kFull = 4 };
const char* warm_level_name(WarmLevel l);
Result<WarmLevel> parse_warm_level(const std::string& s);

struct WarmPolicyOptions {
    // Waiting requests above which the level is low, medium, high (strictly increasing).
    std::array<int64_t, 3> thresholds = {5, 10, 20};
    double seconds_per_request = 0.5;  // the window: min(max_window_s, this x queue depth)
    double max_window_s = 300;
    // Idle spin per level (off, low, medium, high; full spins as high) in milliseconds; -1:
    // for the rest of the level's window.
    std::array<int64_t, 4> spin_ms = {0, 100, 1000, -1};
    // Interval of warm passes during the spin per level (off, low, medium, high) in
    // milliseconds; 0: none (Engine::set_warm_pass_interval).
    std::array<int64_t, 4> pass_ms = {0, 0, 0, 100};
    Status validate() const;
};

// Parses "5,10,20" (three increasing counts) and "0,100,1000,-1" (four spins).
Result<std::array<int64_t, 3>> parse_thresholds(const std::string& s);
Result<std::array<int64_t, 4>> parse_spins(const std::string& s);
Result<std::array<int64_t, 4>> parse_passes(const std::string& s);  // "0,0,0,100"

struct WarmChange {
    WarmLevel from = WarmLevel::kOff, to = WarmLevel::kOff;
    int64_t until_ms = 0;
    std::string reason;  // "queue 12 > 10", "window ended", "suspended: shedding", "manual"
};

class WarmPolicy {
  public:
    explicit WarmPolicy(WarmPolicyOptions o = {}) : o_(o) {}
    const WarmPolicyOptions& options() const { return o_; }
    // One observation of the waiting queue; the change, if the level changed.
    std::optional<WarmChange> observe(int64_t waiting, int64_t now_ms);
    // While on, the level is off and observations do not raise it.
    std::optional<WarmChange> suspend(bool on, const std::string& why, int64_t now_ms);
    // The predictive tier: at least `l` until `until_ms` (never lowers the level; a change
    // only when it raises it).
    std::optional<WarmChange> raise(WarmLevel l, int64_t until_ms, const std::string& why);
    // A level for `duration_ms` (POST /admin/warmup); the queue may still raise it.
    WarmChange set_manual(WarmLevel l, int64_t duration_ms, int64_t now_ms);
    WarmLevel level() const { return level_; }
    int64_t until_ms() const { return until_ms_; }
    bool suspended() const { return suspended_; }
    // The engine's idle spin for the current level at `now_ms`.
    std::chrono::microseconds spin_budget(int64_t now_ms) const;
    // The engine's warm-pass interval for the current level (0: none; level off, which
    // suspension sets, has none by validate()).
    std::chrono::milliseconds pass_interval() const;
    // The window a queue of `waiting` requests earns, in ms.
    int64_t window_ms(int64_t waiting) const;
    WarmLevel level_for(int64_t waiting) const;
    nlohmann::json to_json(int64_t now_ms) const;

  private:
    size_t table_index() const;
    WarmPolicyOptions o_;
    WarmLevel level_ = WarmLevel::kOff;
    int64_t until_ms_ = 0;
    bool suspended_ = false;
};

}  // namespace pagoda::control
