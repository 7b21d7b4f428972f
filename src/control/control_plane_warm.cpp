// The control plane's warmup tiers: the dynamic tier's level from the waiting queue each
// tick (WarmPolicy), applied as the engine's idle spin; manual levels (POST
// /admin/warmup); suspension while the replica sheds or a critical alert fires; the
// pagoda_warm_level and pagoda_warmup_seconds_total{tier} metrics; the full warmup (level
// full: every batch bucket, engine rounds, the KV pool faulted in, then high's spin).
#include <fmt/core.h>

#include <algorithm>

#include "base/log.h"
#include "control/control_plane.h"
#include "metrics/metrics.h"

namespace pagoda::control {

void ControlPlane::warm_tick(int64_t now_ms) {
    const bool suspend = warm_suspender_ && warm_suspender_();
    if (auto c = warm_.suspend(suspend, "shedding or a critical alert", now_ms)) {
        note_warm(*c, now_ms);
    }
    // The predictive tier first, so that a pre-warm still ahead extends its window before
    // the window's end is checked.
    if (forecast_) {
        const Prewarm p = forecast_->prewarm();
        // Held for two minutes of the forecast clock (at least 2.5 s, two ticks), renewed
        // while the rise is ahead.
        const auto hold = std::max<int64_t>(2500, int64_t(120'000.0 / o_.forecast.clock_scale));
        const std::string why =
            fmt::format("forecast: {:.3f} req/s in {:.0f} min (now {:.3f}, rise at {:.3f})",
                        p.predicted_rps, p.lead_minutes, p.current_rps, p.threshold_rps);
        if (p.level != WarmLevel::kOff) {
            if (auto c = warm_.raise(p.level, now_ms + hold, why)) {
                warm_tier_ = "predictive";
                note_warm(*c, now_ms);
            }
        }
    }
    // With the dynamic tier off the queue counts as empty: windows still end.
    const int64_t waiting = o_.warm_dynamic ? engine_.stats()->queue.waiting : 0;
    if (auto c = warm_.observe(waiting, now_ms)) {
        if (c->to > c->from) warm_tier_ = "dynamic";
        note_warm(*c, now_ms);
    }
    const bool act = automation_ == Automation::kOn;
    apply_warmth(act, now_ms);
    // The spin since the last tick belongs to the tier that set the level.
    const double spun = engine_.idle_spin_seconds();
    if (spun > spin_seen_s_) {
        warm_seconds_[warm_tier_] += spun - spin_seen_s_;
        spin_seen_s_ = spun;
    }
}

// What the level does in the engine: its idle spin and warm passes (none when !act).
void ControlPlane::apply_warmth(bool act, int64_t now_ms) {
    engine_.set_idle_spin(act ? warm_.spin_budget(now_ms) : std::chrono::microseconds(0));
    engine_.set_warm_pass_interval(act ? warm_.pass_interval() : std::chrono::milliseconds(0));
}

void ControlPlane::note_warm(const WarmChange& c, int64_t now_ms) {
    const json d = {{"from", warm_level_name(c.from)},
                    {"to", warm_level_name(c.to)},
                    {"until_ms", c.until_ms},
                    {"reason", c.reason},
                    {"tier", warm_tier_},
                    {"mode", automation_name(automation_)}};
    record("warm_level", d, now_ms);
    log_info("warm_level from={} to={} tier={} reason=\"{}\" mode={}", warm_level_name(c.from),
             warm_level_name(c.to), warm_tier_, c.reason, automation_name(automation_));
    if (c.to == WarmLevel::kOff) warm_tier_ = "dynamic";
}

json ControlPlane::warmup_report() const {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = unix_ms_now();
    json j = warm_.to_json(now);
    j["dynamic"] = o_.warm_dynamic;
    j["manual"] = warm_tier_ == "manual";
    j["tier"] = warm_.level() == WarmLevel::kOff ? "" : warm_tier_;
    j["predictive"] = forecast_ != nullptr;
    j["idle_spin_seconds_total"] = engine_.idle_spin_seconds();
    j["warm_passes_total"] = engine_.warm_passes();
    j["warm_passes_interrupted_total"] = engine_.warm_passes_interrupted();
    j["seconds_by_tier"] = warm_seconds_;
    j["full_warmup"] = full_status_;
    j["startup"] = startup_warmup_;
    return j;
}

void ControlPlane::set_full_warmup(std::function<Result<std::string>()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    full_fn_ = std::move(fn);
}

Status ControlPlane::start_full_warmup(int64_t duration_ms, int64_t now_ms) {
    if (!full_fn_) {
        return make_error(ErrorCode::kUnsupported, "this server has no full warmup to run");
    }
    if (full_status_.value("state", "") == "running") {
        return make_error(ErrorCode::kConflict,
                          "a full warmup is already running (GET /admin/warmup: full_warmup)");
    }
    if (full_thread_.joinable()) full_thread_.join();  // the last one has finished
    full_status_ = {{"state", "running"}, {"started_at_ms", now_ms}};
    record("warm_full", {{"outcome", "started"}, {"duration_ms", duration_ms}}, now_ms);
    full_thread_ = std::thread([this, duration_ms] { run_full_warmup(duration_ms); });
    return ok_status();
}

// The full warmup's thread: the work, then level full; its effect checked (the level is
// full afterwards) and the outcome recorded either way.
void ControlPlane::run_full_warmup(int64_t duration_ms) {
    std::function<Result<std::string>()> fn;
    int64_t started = 0;
    {
        std::lock_guard<std::mutex> lock(mu_);
        fn = full_fn_;
        started = full_status_.value("started_at_ms", int64_t(0));
    }
    Result<std::string> done = fn();  // never under mu_: it runs requests through the engine
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = unix_ms_now();
    std::string error = done.ok() ? "" : done.error().message;
    if (error.empty() && warm_.suspended()) {
        error = "warmup is suspended (shedding or a critical alert): level full not held";
    }
    if (error.empty()) {
        const WarmChange c = warm_.set_manual(WarmLevel::kFull, duration_ms, now);
        warm_tier_ = "manual";
        note_warm(c, now);
        if (automation_ == Automation::kOn) apply_warmth(true, now);
        if (warm_.level() != WarmLevel::kFull) error = "the level did not become full";
    }
    const char* outcome = error.empty() ? "ok" : "failed";
    const double seconds = double(now - started) / 1000.0;
    ++full_outcomes_[outcome];
    warm_seconds_["manual"] += seconds;
    full_status_ = {{"state", error.empty() ? "done" : "failed"},
                    {"started_at_ms", started},
                    {"finished_at_ms", now},
                    {"seconds", seconds},
                    {"detail", error.empty() ? *done : error}};
    record("warm_full",
           {{"outcome", outcome}, {"seconds", seconds}, {"detail", full_status_["detail"]}}, now);
    if (error.empty()) {
        log_info("warm_full outcome=ok seconds={:.2f} detail=\"{}\"", seconds, *done);
    } else {
        log_warn("warm_full outcome=failed error=\"{}\"", error);
    }
}

Status ControlPlane::set_warm_level(WarmLevel level, int64_t duration_ms, int64_t now_ms) {
    if (duration_ms < 0 || duration_ms > 86'400'000) {
        return make_error(ErrorCode::kInvalidArgument,
                          "a warm level's duration must be in [0, 1d] (got {} ms)", duration_ms);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (warm_.suspended()) {
        return make_error(ErrorCode::kConflict,
                          "warmup is suspended while the replica sheds load or a critical alert "
                          "fires");
    }
    if (level == WarmLevel::kFull) return start_full_warmup(duration_ms, now_ms);
    const WarmChange c = warm_.set_manual(level, duration_ms, now_ms);
    warm_tier_ = level != WarmLevel::kOff ? "manual" : "dynamic";
    note_warm(c, now_ms);
    if (automation_ == Automation::kOn) apply_warmth(true, now_ms);
    return ok_status();
}

void ControlPlane::note_startup_warmup(double seconds, const std::string& mode, int requests_ok,
                                       int requests) {
    std::lock_guard<std::mutex> lock(mu_);
    warm_seconds_["minimal"] += seconds;
    startup_warmup_ = {{"mode", mode},
                       {"seconds", seconds},
                       {"api_requests_ok", requests_ok},
                       {"api_requests", requests},
                       {"ok", mode != "off" && requests_ok == requests}};
}

void ControlPlane::set_warm_suspender(std::function<bool()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    warm_suspender_ = std::move(fn);
}

std::string ControlPlane::warm_metrics(const std::string& model_name) const {
    metrics::TextWriter w;
    const metrics::Labels model = {{"model_name", model_name}};
    w.family("pagoda_warm_level", "gauge",
             "Warm level: 0 off, 1 low, 2 medium, 3 high, 4 full (how long the compute pool "
             "spins between steps; full: high after a full warmup).");
    w.sample("pagoda_warm_level", model, double(int(warm_.level())));
    w.family("pagoda_warmup_full_total", "counter",
             "Full warmups (POST /admin/warmup {\"level\": \"full\"}) by outcome.");
    for (const char* outcome : {"ok", "failed"}) {
        auto it = full_outcomes_.find(outcome);
        w.sample("pagoda_warmup_full_total", {{"model_name", model_name}, {"outcome", outcome}},
                 double(it == full_outcomes_.end() ? 0 : it->second));
    }
    w.family("pagoda_warmup_seconds_total", "counter",
             "Time spent warming by tier: minimal (before ready), dynamic (queue depth), "
             "predictive (forecast), manual (POST /admin/warmup); for the spinning tiers, wall "
             "time spun.");
    for (const char* tier : {"minimal", "dynamic", "predictive", "manual"}) {
        auto it = warm_seconds_.find(tier);
        w.sample("pagoda_warmup_seconds_total", {{"model_name", model_name}, {"tier", tier}},
                 it == warm_seconds_.end() ? 0.0 : it->second);
    }
    return w.text();
}

}  // namespace pagoda::control
