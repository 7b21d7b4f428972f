#pragma once
// OomGuard: out-of-memory risk signals from a series of engine and process samples, and
// what to do about them. Signals: free KV blocks under a fraction of the pool while requests
// wait, recompute preemptions per minute over a threshold (re-layout evictions left out),
// resident memory over a fraction of the memory limit, a KV pool that could not be
// allocated. A signal within the guard window after a change rolls the replica back to the
// last stable version; otherwise it is reported only. Pure logic over the samples it is
// given; not thread-safe.

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "control/policy/length_stats.h"

namespace pagoda::control {

struct GuardOptions {
    double free_blocks_fraction = 0.02;  // --oom-guard-free-blocks
    double preemptions_per_minute = 60;  // --oom-guard-preemptions
    double rss_fraction = 0.9;           // --oom-guard-rss-fraction
    int64_t memory_limit_bytes = 0;      // --memory-limit, else cgroup memory.max; 0: none
    int64_t window_ms = 300'000;         // --oom-guard-window: after a change
    int sustain = 3;                     // consecutive samples a level signal must hold
};

struct GuardSample {
    int64_t at_ms = 0;
    int64_t free_blocks = 0, total_blocks = 0;
    int64_t waiting = 0;
    int64_t pressure_preemptions = 0;  // cumulative, re-layout evictions excluded
    int64_t rss_bytes = 0;
};

struct GuardSignal {
    std::string name;  // kv_free_blocks, preemption_rate, rss, pool_allocation
    double value = 0, threshold = 0;
    std::string text;  // for logs and the audit log
    json to_json() const;
};

enum class GuardAction { kNone, kReport, kRollback };
const char* guard_action_name(GuardAction a);

// Whether signals at `now_ms` roll back: only within the guard window after the current
// version was made, and only when there is a stable version with another value to return to.
GuardAction guard_action(bool any_signal, int64_t now_ms, int64_t changed_at_ms,
                         bool stable_target_differs, const GuardOptions& o);

class OomGuard {
  public:
    explicit OomGuard(GuardOptions o) : o_(o) {}
    // The signals that hold at this sample. Level signals (free blocks, RSS) must hold for
    // `sustain` samples in a row; the preemption rate is over the last 60 s of samples.
    std::vector<GuardSignal> observe(const GuardSample& s);
    static GuardSignal allocation_failure(const std::string& error);
    const GuardOptions& options() const { return o_; }

  private:
    GuardOptions o_;
    std::deque<GuardSample> minute_;  // the last 60 s
    int low_free_run_ = 0, high_rss_run_ = 0;
};

// Resident memory of this process (/proc/self/statm); 0 when unknown.
int64_t read_rss_bytes();
// memory.max of this process's cgroup (v2), 0 when unlimited or unknown.
int64_t read_cgroup_memory_limit();
// Memory a new allocation can still get: MemAvailable, and no more than the cgroup's
// memory.max minus memory.current where a limit is set. 0 when unknown.
int64_t read_available_memory();

}  // namespace pagoda::control
