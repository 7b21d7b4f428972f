#pragma once
// ControlPlane: a replica's automatic control, ticked once a second. It owns the
// ConfigManager (every change goes through it) and runs:
// - context-length statistics: lengths of finished requests from the engine, persisted in
//   the state database every 30 s and at shutdown, loaded at start;
// - the block-size policy (static | seed | measured) on a decision timer, acting only when
//   the predicted gain passes a threshold and outside a cooldown; with stored statistics a
//   first decision runs at start, before traffic;
// - the OOM guard: risk signals from engine and process samples; within the guard window
//   after a change it rolls back to the last stable version, otherwise it reports.
// Automation mode: `on` applies actions, `dry-run` records what it would do, `paused` (set by
// a person) records nothing and acts on nothing; signals are reported in every mode. Every
// action and decision is in the audit log (events table). Thread-safe.

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "control/config/config_manager.h"
#include "control/forecast/forecast_tier.h"
#include "control/policy/block_size_policy.h"
#include "control/policy/length_stats.h"
#include "control/policy/oom_guard.h"
#include "control/warm/warm_policy.h"

namespace pagoda::control {

enum class Automation { kOn, kDryRun, kPaused };
Result<Automation> parse_automation(const std::string& s);
const char* automation_name(Automation a);

struct ControlOptions {
    ConfigManagerOptions config;
    BlockSizePolicy policy = BlockSizePolicy::kMeasured;  // --block-size-policy
    int64_t decide_every_ms = 300'000;                    // --block-size-interval
    double min_gain = 0.05;                               // --block-size-min-gain
    int64_t cooldown_ms = 900'000;                        // --block-size-cooldown
    int64_t recalibrate_every_ms = 86'400'000;            // --recalibrate-every
    int64_t min_samples = 100;                            // finished requests before a decision
    SeedParams seed;
    GuardOptions guard;
    Automation automation = Automation::kOn;  // --automation
    WarmPolicyOptions warm;                   // --warm-thresholds, --warm-window-*, --warm-spin-ms
    bool warm_dynamic = true;                 // --no-dynamic-warmup: only manual levels
    ForecastOptions forecast;                 // the predictive tier (--no-forecast, ...)
};

class ControlPlane {
  public:
    static Result<std::unique_ptr<ControlPlane>> open(engine::Engine& engine,
                                                      const ControlOptions& opts);
    ~ControlPlane();  // saves the statistics

    ConfigManager& config() { return *cm_; }
    void tick(int64_t now_ms);
    // A block-size decision now, whatever the timer says (the cooldown still holds).
    json decide_block_size(int64_t now_ms);
    json block_size_report() const;  // GET /admin/block-size
    json guard_report() const;       // signals of the last tick, guard settings
    Automation automation() const;
    Status set_automation(Automation a, const std::string& reason);
    Result<std::vector<json>> events(const std::string& kind, int limit);
    ContextLengthStats length_stats() const;
    Status save_stats(int64_t now_ms);
    std::string metrics_text(const std::string& model_name) const;

    // Warmup tiers (control_plane_warm.cpp). GET /admin/warmup: the level, its window and
    // the policy; set_warm_level: POST /admin/warmup {"level", "duration"}.
    nlohmann::json warmup_report() const;
    Status set_warm_level(WarmLevel level, int64_t duration_ms, int64_t now_ms);
    // Seconds the startup (minimal) warmup took, for pagoda_warmup_seconds_total{tier}.
    void note_startup_warmup(double seconds, const std::string& mode, int requests_ok,
                             int requests);
    // Warmup is suspended while this returns true (shedding, a critical alert firing).
    void set_warm_suspender(std::function<bool()> fn);
    // What level `full` runs before it holds (the app's: matmul primitives of every batch
    // bucket, engine rounds, the KV pool faulted in); returns a description or an error.
    // set_warm_level(kFull) runs it on a thread of its own (the POST answers at once; GET
    // /admin/warmup's `full_warmup.state` says running, done or failed), then holds level
    // full for the duration. The outcome is audited (`warm_full`) and counted
    // (pagoda_warmup_full_total{outcome}); a failure is logged as a warning.
    void set_full_warmup(std::function<Result<std::string>()> fn);
    // The predictive tier; null with --no-forecast. GET /admin/forecast reads its report.
    ForecastTier* forecast() { return forecast_.get(); }

  private:
    ControlPlane(engine::Engine& e, std::unique_ptr<ConfigManager> cm, ControlOptions o)
        : engine_(e),
          cm_(std::move(cm)),
          o_(std::move(o)),
          guard_(o_.guard),
          automation_(o_.automation) {}
    // The stored calibration when its key matches (unless `fresh`), else a new one, stored.
    Status load_or_calibrate(int64_t now_ms, bool fresh = false);
    // `seed`: measure the kernels again and refit the scaling factor to the measured best
    // block for the current distribution (every --recalibrate-every). mu_ held.
    void recalibrate_seed(int64_t now_ms);
    json decide_locked(int64_t now_ms);  // mu_ held
    // Whether changing to `choice` pays for its re-layout now (mu_ held); fills d["economics"].
    bool worth_relayout(const MeasuredDecision& md, int current, int choice, int64_t now_ms,
                        json& d, std::string& reason);
    MeasuredInputs measured_inputs() const;  // the live pool and recent peaks; mu_ held
    void guard_tick(int64_t now_ms);         // mu_ held
    void warm_tick(int64_t now_ms);          // mu_ held
    void note_warm(const WarmChange& c, int64_t now_ms);            // mu_ held
    void apply_warmth(bool act, int64_t now_ms);                    // mu_ held
    std::string warm_metrics(const std::string& model_name) const;  // mu_ held
    void record(const std::string& kind, const json& detail, int64_t now_ms);
    Status start_full_warmup(int64_t duration_ms, int64_t now_ms);  // mu_ held
    void run_full_warmup(int64_t duration_ms);                      // the full warmup's thread

    engine::Engine& engine_;
    std::unique_ptr<ConfigManager> cm_;
    ControlOptions o_;
    mutable std::mutex mu_;
    // Guarded by mu_:
    ContextLengthStats stats_;
    bool stats_dirty_ = false;
    int64_t last_save_ms_ = 0;
    std::optional<Calibration> cal_;
    int64_t calibrated_at_ms_ = 0;
    double seed_scaling_ = 0.15;
    int64_t last_decision_ms_ = 0, last_policy_change_ms_ = 0;
    // A change deferred because the re-layout would cost more than it saves now: decided
    // again at this time (a quieter moment may come sooner than the decision interval).
    int64_t retry_decision_ms_ = 0;
    int64_t gen_tokens_seen_ = -1, gen_seen_ms_ = 0;  // the decode rate between decisions
    json last_decision_;
    int64_t peak_running_ = 0;
    double peak_kv_usage_ = 0;
    OomGuard guard_;
    std::vector<GuardSignal> signals_;  // of the last tick
    std::map<std::string, int64_t> signal_counts_;
    std::map<std::string, int64_t> decisions_;  // by action
    std::vector<std::string> last_signal_names_;
    Automation automation_ = Automation::kOn;
    int64_t allocation_failures_seen_ = 0;
    int64_t guard_rollbacks_ = 0;
    WarmPolicy warm_{o_.warm};
    std::function<bool()> warm_suspender_;
    double spin_seen_s_ = 0;                      // engine idle spin already attributed to a tier
    std::map<std::string, double> warm_seconds_;  // by tier
    json startup_warmup_;                         // note_startup_warmup's facts
    std::string warm_tier_ = "dynamic";           // the tier that set the level
    std::unique_ptr<ForecastTier> forecast_;      // its own lock, taken after mu_
    // The full warmup: its work, thread and last outcome (guarded by mu_).
    std::function<Result<std::string>()> full_fn_;
    std::thread full_thread_;
    json full_status_ = {{"state", "idle"}};
    std::map<std::string, int64_t> full_outcomes_;  // ok, failed
};

}  // namespace pagoda::control
