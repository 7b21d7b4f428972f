#pragma once
// TrafficController: moves the primary pools' weights of a Router for progressive switches
// (with the P99 breaker), canaries (with the canary judge) and schedules (with a clock that
// can be compressed for rehearsals). Every step, pause, resume, rollback, promotion and
// verdict is audited; a human can pause, resume, promote or abort through
// /admin/rollout, and dry-run mode records the decisions without moving traffic.

#include <atomic>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "router/judges.h"
#include "router/router.h"
#include "router/schedule.h"

namespace pagoda::router {

struct ControllerOptions {
    BreakerPolicy breaker;
    double window_s = 30;  // breaker and canary judge cadence (router clock seconds)
    CanaryPolicy canary;
    std::optional<Schedule> schedule;
    double clock_scale = 1;   // schedule clock: this many seconds per real second
    int64_t clock_start = 0;  // schedule clock's unix time at start; 0 = now
    bool dry_run = false;
    // Pre-warm a pool (fleet: start its replicas, then warm them). Default: Router::
    // prewarm_pool on a thread of its own (a full warmup of each backend, its effect checked).
    std::function<void(const std::string& pool)> prewarm;
    // A canary's verdict with its evidence (the app stores it with the baseline history).
    std::function<void(const nlohmann::json& verdict)> on_verdict;
};

// The options a RouterConfig implies (breaker, canary, schedule); the app adds the hooks.
Result<ControllerOptions> controller_options(const RouterConfig& c);

class TrafficController {
  public:
    TrafficController(Router& r, ControllerOptions o);
    ~TrafficController();
    // Registers /admin/rollout and the rollout metrics, and starts the ticking thread.
    void start();
    void stop();

    Status shift(const std::string& pool, double percent, const std::string& reason);
    Status reverse(const std::string& reason);
    Status canary(const std::string& pool, double percent, const std::string& reason);
    Status pause(const std::string& reason);
    Status resume(const std::string& reason);
    Status promote(const std::string& reason);
    Status abort(const std::string& reason);
    nlohmann::json status() const;
    // One step of the clock (tests call it directly; the thread calls it every 200 ms).
    void tick();
    int64_t schedule_now() const;  // the schedule clock, unix seconds

  private:
    enum class Mode { kIdle, kSwitch, kCanary };
    enum class State { kIdle, kRunning, kPaused, kRolledBack, kDone, kPromoted, kAborted };
    static const char* mode_name(Mode m);
    static const char* state_name(State s);
    Status set(std::map<std::string, double> w, const std::string& reason);  // mu_ held
    std::map<std::string, double> with_share(const std::string& pool, double pct) const;
    void record(const std::string& kind, nlohmann::json detail);  // mu_ held
    void judge();                                                 // mu_ held
    void judge_switch(double now);                                // mu_ held
    void judge_canary_arm(double now);                            // mu_ held
    void run_schedule();                                          // mu_ held
    std::pair<int, nlohmann::json> admin(const std::string& method, const nlohmann::json& body);
    std::string metrics_text() const;

    Router& r_;
    const ControllerOptions o_;
    mutable std::mutex mu_;
    Mode mode_ = Mode::kIdle;
    State state_ = State::kIdle;
    std::string source_, target_;
    double goal_ = 0;                       // target's share the switch is heading to
    std::optional<double> deferred_;        // a shift that came while paused
    std::map<std::string, double> before_;  // weights before the switch or canary
    double window_start_ = 0, canary_start_ = 0;
    Breaker breaker_;
    nlohmann::json last_window_, last_verdict_;
    // Breaker windows of the current switch: judged, and with both arms compared (the last
    // of those, with its router time), for GET /admin/rollout.
    nlohmann::json last_compared_;
    int64_t windows_judged_ = 0, windows_compared_ = 0;
    std::vector<nlohmann::json> history_;
    std::string last_source_;  // for reverse
    int64_t sched_last_ = 0;
    std::chrono::steady_clock::time_point real_start_;
    std::atomic<bool> stopping_{false};
    std::thread thread_;
    std::vector<std::thread> prewarms_;  // default pre-warms in flight; joined by stop()
};

}  // namespace pagoda::router
