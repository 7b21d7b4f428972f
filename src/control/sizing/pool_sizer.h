#pragma once
// PoolSizer: how many replicas a pool should run, decided once per tick from the forecast
// and the live signals, with hysteresis and cooldowns (issue 37). Three needs, the largest
// wins, bounded by [min_replicas, max_replicas]:
//   - forecast: the most replicas the forecast rate needs from now until the cold start
//     has passed (a replica asked for now serves only after its cold start), at the target
//     utilisation of the per-replica capacity;
//   - load: what the current arrival rate needs at that utilisation;
//   - live: when the waiting queue per replica passes its target or the p99 TTFT passes the
//     SLO, one more replica (more when the queue is several targets deep).
// Up moves at once (after the up cooldown); down only when the need has stayed below the
// current count, computed with `down_headroom` spare capacity, for the stabilisation window,
// one replica per step, after the down cooldown. A pool with min_replicas 0 goes to zero
// after `idle_to_zero_s` without requests and with no forecast traffic in the lead window,
// and wakes (to one replica, at once) on the first request or forecast rise.
// Pure state machine over the signals: the caller (fleet supervisor, rehearsal) applies,
// audits, dry-runs and pauses. Not thread-safe.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"

namespace pagoda::control {

struct PoolSizingConfig {
    int min_replicas = 1, max_replicas = 1;
    // Requests per second one replica serves within the SLO (measured by `pagoda tune` or a
    // rehearsal); 0: no rate-based sizing (forecast and load needs are 0; live signals only).
    double replica_rps = 0;
    double target_utilisation = 0.7;    // of replica_rps the rate-based needs plan for
    double target_waiting = 4;          // waiting requests per replica above which it scales up
    double ttft_slo_s = 0;              // p99 TTFT above this scales up; 0 = not a signal
    double cold_start_s = 60;           // start to ready: how far ahead the forecast is read
    double up_cooldown_s = 30;          // between two scale-ups
    double down_cooldown_s = 120;       // after any change, before a scale-down
    double down_stabilisation_s = 300;  // the lower need must hold this long
    double down_headroom = 0.15;        // scale down only if the rest run at <= (1 - this) x target
    double idle_to_zero_s = 600;        // min_replicas 0: no request for this long -> zero
    Status validate() const;
};

struct PoolSignals {
    double now_s = 0;
    int current = 0;             // replicas running or starting (not leaving)
    double rate_rps = 0;         // arrivals over the last minute
    double waiting = 0;          // requests waiting, the pool's replicas and the router's hold
    double p99_ttft_s = -1;      // recent; < 0 unknown
    double since_request_s = 0;  // since the pool's last request (idle time)
    // Forecast rate from now on, one value per `forecast_step_s`; empty: none.
    std::vector<double> forecast_rps;
    double forecast_step_s = 60;
};

struct SizingDecision {
    int current = 0, desired = 0;
    std::string reason;     // "forecast", "load", "queue", "ttft", "wake", "idle", "down", "hold",
                            // "min", "max"
    nlohmann::json inputs;  // the signals and the three needs
    bool changed() const { return desired != current; }
};

class PoolSizer {
  public:
    explicit PoolSizer(PoolSizingConfig c) : c_(c) {}
    const PoolSizingConfig& config() const { return c_; }
    SizingDecision decide(const PoolSignals& s);
    // The caller applied `d` at `now_s` (starts the cooldowns).
    void applied(const SizingDecision& d, double now_s);
    // Replicas a rate needs at the target utilisation (x `headroom` capacity).
    int need_for_rate(double rps, double headroom = 1) const;

  private:
    int forecast_need(const PoolSignals& s) const;
    int live_need(const PoolSignals& s, bool& queue_hot) const;
    PoolSizingConfig c_;
    double last_up_s_ = -1e18, last_change_s_ = -1e18;
    double below_since_s_ = -1;  // since when the need has been below the current count
};

}  // namespace pagoda::control
