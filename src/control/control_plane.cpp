// ControlPlane: the implementation (the contract is in control/control_plane.h).
#include "control/control_plane.h"

#include <algorithm>

#include "base/log.h"
#include "metrics/metrics.h"

namespace pagoda::control {

namespace {

constexpr char kStatsKey[] = "context_lengths";
constexpr char kCalibrationKey[] = "block_size_calibration";
constexpr char kSeedScalingKey[] = "seed_scaling";
constexpr int64_t kSaveEveryMs = 30'000;

// Calibration lengths: 64, 256, 1024, ... below the context limit (at most 8192; longer
// contexts extrapolate), and the limit itself.
std::vector<int64_t> calibration_lengths(int64_t max_len) {
    const int64_t top = std::clamp<int64_t>(max_len, 16, 8192);
    std::vector<int64_t> out;
    for (int64_t l = 64; l < top; l *= 4) out.push_back(l);
    out.push_back(top);
    return out;
}

}  // namespace

Result<Automation> parse_automation(const std::string& s) {
    if (s == "on") return Automation::kOn;
    if (s == "dry-run" || s == "dry_run") return Automation::kDryRun;
    if (s == "paused") return Automation::kPaused;
    return make_error(ErrorCode::kInvalidArgument,
                      "automation mode \"{}\" is not one of: on, dry-run, paused", s);
}

const char* automation_name(Automation a) {
    switch (a) {
        case Automation::kOn: return "on";
        case Automation::kDryRun: return "dry-run";
        case Automation::kPaused: return "paused";
    }
    return "?";
}

Result<std::unique_ptr<ControlPlane>> ControlPlane::open(engine::Engine& engine,
                                                         const ControlOptions& opts) {
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<ConfigManager> cm,
                            ConfigManager::open(engine, opts.config));
    std::unique_ptr<ControlPlane> cp(new ControlPlane(engine, std::move(cm), opts));
    const int64_t now = unix_ms_now();
    std::lock_guard<std::mutex> lock(cp->mu_);
    auto stored = cp->cm_->with_db([](StateDb& db) { return db.get_json(kStatsKey); });
    if (!stored.ok()) return stored.error();
    if (*stored) {
        auto s = ContextLengthStats::from_json(**stored);
        if (!s.ok()) {
            return make_error(ErrorCode::kIo, "{}: stored {}: {}",
                              cp->cm_->with_db([](StateDb& db) { return db.path(); }), kStatsKey,
                              s.error().message);
        }
        cp->stats_ = std::move(s).value();
    }
    log_info("context_lengths loaded={} ema={:.0f} policy={}", cp->stats_.all().count(),
             cp->stats_.ema(), block_size_policy_name(opts.policy));
    if (opts.forecast.enabled) {
        PAGODA_ASSIGN_OR_RETURN(cp->forecast_, cp->cm_->with_db([&](StateDb& db) {
            return ForecastTier::open(db, opts.forecast, now);
        }));
    }
    if (opts.policy != BlockSizePolicy::kStatic) {
        PAGODA_TRY(cp->load_or_calibrate(now));
        if (cp->stats_.window_for(now, opts.min_samples).count() >= opts.min_samples) {
            cp->decide_locked(now);  // starts from the stored distribution
        }
        cp->last_decision_ms_ = now;
        cp->gen_tokens_seen_ = cp->engine_.stats()->generation_tokens;
        cp->gen_seen_ms_ = now;
    }
    return cp;
}

ControlPlane::~ControlPlane() {
    if (full_thread_.joinable()) full_thread_.join();
    if (Status st = save_stats(unix_ms_now()); !st.ok()) {
        log_warn("context_lengths_save_failed error=\"{}\"", st.error().message);
    }
}

Status ControlPlane::load_or_calibrate(int64_t now_ms, bool fresh) {
    const model::ModelConfig& mc = engine_.model().config();
    CalibrationShape shape{mc.num_layers, mc.num_heads, mc.num_kv_heads, mc.head_dim,
                           engine_.kv_config().dtype};
    const std::string key = calibration_key(shape);
    auto stored = cm_->with_db([](StateDb& db) { return db.get_json(kCalibrationKey); });
    if (!stored.ok()) return stored.error();
    if (!fresh && *stored && (**stored).value("key", "") == key) {
        auto c = Calibration::from_json(**stored);
        if (c.ok()) {
            cal_ = std::move(c).value();
            calibrated_at_ms_ = (**stored).value("at_ms", now_ms);
        }
    }
    auto scaling = cm_->with_db([](StateDb& db) { return db.get_json(kSeedScalingKey); });
    if (scaling.ok() && *scaling) seed_scaling_ = (**scaling).value("scaling", o_.seed.scaling);
    if (!cal_) {
        const int64_t max_len = engine_.config().sched.max_model_len > 0
                                    ? engine_.config().sched.max_model_len
                                    : mc.context_length;
        const auto t0 = std::chrono::steady_clock::now();
        PAGODA_ASSIGN_OR_RETURN(cal_, calibrate(shape, calibration_lengths(max_len)));
        calibrated_at_ms_ = now_ms;
        json j = cal_->to_json();
        j["at_ms"] = now_ms;
        PAGODA_TRY(
            cm_->with_db([&](StateDb& db) { return db.put_json(kCalibrationKey, j, now_ms); }));
        log_info("block_size_calibrated seconds={:.2f} key=\"{}\"",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), key);
    }
    return ok_status();
}

void ControlPlane::record(const std::string& kind, const json& detail, int64_t now_ms) {
    Status st = cm_->with_db([&](StateDb& db) { return db.record_event(kind, detail, now_ms); });
    if (!st.ok()) log_warn("audit_log_failed kind={} error=\"{}\"", kind, st.error().message);
}

Status ControlPlane::save_stats(int64_t now_ms) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stats_dirty_) return ok_status();
    const json j = stats_.to_json();
    PAGODA_TRY(cm_->with_db([&](StateDb& db) { return db.put_json(kStatsKey, j, now_ms); }));
    stats_dirty_ = false;
    last_save_ms_ = now_ms;
    return ok_status();
}

ContextLengthStats ControlPlane::length_stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

void ControlPlane::tick(int64_t now_ms) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        const std::vector<int32_t> finished = engine_.take_finished_lengths();
        for (int32_t len : finished) {
            stats_.add(len, now_ms);
            stats_dirty_ = true;
        }
        const auto st = engine_.stats();
        if (forecast_) {
            cm_->with_db([&](StateDb& db) {
                forecast_->observe(db, now_ms, st->requests_submitted, st->queue.waiting, finished);
                return 0;
            });
        }
        peak_running_ = std::max(peak_running_, st->queue.running);
        peak_kv_usage_ = std::max(peak_kv_usage_, st->blocks.usage);
        guard_tick(now_ms);
        warm_tick(now_ms);
        if (Status s = cm_->tick(now_ms); !s.ok()) {
            log_warn("config_tick_failed error=\"{}\"", s.error().message);
        }
        if (o_.policy != BlockSizePolicy::kStatic &&
            (now_ms - last_decision_ms_ >= o_.decide_every_ms ||
             (retry_decision_ms_ > 0 && now_ms >= retry_decision_ms_))) {
            decide_locked(now_ms);
        }
    }
    if (now_ms - last_save_ms_ >= kSaveEveryMs) {
        if (Status s = save_stats(now_ms); !s.ok()) {
            log_warn("context_lengths_save_failed error=\"{}\"", s.error().message);
        }
    }
}

void ControlPlane::recalibrate_seed(int64_t now_ms) {
    cal_.reset();
    calibrated_at_ms_ = now_ms;  // a failure waits for the next period too
    if (Status st = load_or_calibrate(now_ms, /*fresh=*/true); !st.ok()) {
        log_warn("recalibration_failed error=\"{}\"", st.error().message);
        return;
    }
    const LengthHistogram& w = stats_.window_for(now_ms, o_.min_samples);
    if (w.count() < o_.min_samples || !cal_) return;
    const int best = measured_decide(w, *cal_, measured_inputs()).block;
    SeedParams p = o_.seed;
    p.scaling = seed_scaling_;
    const SeedDecision sd = seed_decide(w, stats_.ema(), stats_.all().mean(), p);
    const double before = seed_scaling_;
    seed_scaling_ = refit_scaling(sd.predicted, best);
    const json detail = {{"scaling_from", before},
                         {"scaling_to", seed_scaling_},
                         {"predicted", sd.predicted},
                         {"measured_best", best}};
    Status st = cm_->with_db([&](StateDb& db) {
        return db.put_json(kSeedScalingKey, {{"scaling", seed_scaling_}, {"at_ms", now_ms}},
                           now_ms);
    });
    if (!st.ok()) log_warn("seed_scaling_save_failed error=\"{}\"", st.error().message);
    record("seed_recalibration", detail, now_ms);
    log_info("seed_recalibration scaling_from={:.4f} scaling_to={:.4f} measured_best={}", before,
             seed_scaling_, best);
}

json ControlPlane::decide_block_size(int64_t now_ms) {
    std::lock_guard<std::mutex> lock(mu_);
    return decide_locked(now_ms);
}

}  // namespace pagoda::control
