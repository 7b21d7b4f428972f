#pragma once
// The decisions of a traffic shift, as pure functions over per-arm samples (router.h's
// ArmSample), so they are unit-tested on synthetic series:
// - the breaker of a progressive switch compares the target arm's P99 (TTFT and end-to-end,
//   per length class) with the source arm's over the same window: above
//   (1 + threshold) x source it pauses the switch; after `rollback_windows` such windows in a
//   row it rolls back; a window back under the threshold resumes;
// - the canary judge compares a candidate arm with the baseline arm with the Mann-Whitney U
//   test and the baseline's noise band: promote, wait, or roll back, with the evidence.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "router/router.h"

namespace pagoda::router {

struct BreakerPolicy {
    double threshold = 0.20;
    int min_samples = 20;
    int rollback_windows = 2;
};

enum class WindowVerdict { kNoData, kWithin, kAbove };

struct WindowResult {
    WindowVerdict verdict = WindowVerdict::kNoData;
    nlohmann::json evidence;  // per metric and class: source/target p99, ratio, samples
    std::string worst;        // "e2e/short" of the largest ratio above the threshold
    double worst_ratio = 0;
};

// One window: every (metric, class) with min_samples in both arms is compared.
WindowResult compare_window(const std::vector<ArmSample>& source,
                            const std::vector<ArmSample>& target, const BreakerPolicy& p);

enum class BreakerAction { kNone, kPause, kResume, kRollback };
const char* breaker_action_name(BreakerAction a);

// The breaker's memory across windows.
class Breaker {
  public:
    explicit Breaker(BreakerPolicy p = {}) : p_(p) {}
    BreakerAction feed(const WindowResult& w);
    bool paused() const { return paused_; }
    int windows_above() const { return above_; }

  private:
    BreakerPolicy p_;
    bool paused_ = false;
    int above_ = 0;
};

struct CanaryPolicy {
    double tolerance = 0.10;  // a slowdown within max(this, the baseline's noise band) is equal
    double alpha = 0.05;      // significance of the Mann-Whitney test
    int min_samples = 50;     // candidate requests before any verdict
    int max_samples = 1000;   // undecided at this many: roll back (not shown to be as good)
    double max_error_increase = 0.01;  // candidate error rate above baseline + this: roll back
};

struct CanaryVerdict {
    std::string verdict;  // promote, wait, rollback
    std::string reason;
    nlohmann::json evidence;
};

CanaryVerdict judge_canary(const std::vector<ArmSample>& baseline,
                           const std::vector<ArmSample>& candidate, const CanaryPolicy& p);

// Linear-interpolated quantile (numpy's default) of unsorted values; NaN when empty.
double quantile(std::vector<double> v, double q);

}  // namespace pagoda::router
