// TrafficController: the implementation (the contract is in router/rollout.h).
#include "router/rollout.h"

#include <fmt/format.h>

#include <chrono>

#include "base/log.h"
#include "metrics/metrics.h"

namespace pagoda::router {

using json = nlohmann::json;

const char* TrafficController::mode_name(Mode m) {
    switch (m) {
        case Mode::kIdle: return "idle";
        case Mode::kSwitch: return "switch";
        case Mode::kCanary: return "canary";
    }
    return "idle";
}

const char* TrafficController::state_name(State s) {
    switch (s) {
        case State::kIdle: return "idle";
        case State::kRunning: return "running";
        case State::kPaused: return "paused";
        case State::kRolledBack: return "rolled_back";
        case State::kDone: return "done";
        case State::kPromoted: return "promoted";
        case State::kAborted: return "aborted";
    }
    return "idle";
}

Result<ControllerOptions> controller_options(const RouterConfig& c) {
    ControllerOptions o;
    o.breaker.threshold = c.breaker_threshold;
    o.breaker.min_samples = c.breaker_min_samples;
    o.breaker.rollback_windows = c.breaker_rollback_windows;
    o.window_s = c.breaker_window_s;
    o.canary.tolerance = c.canary_tolerance;
    o.canary.min_samples = c.canary_min_samples;
    o.canary.max_samples = c.canary_max_samples;
    if (!c.schedule.empty()) {
        PAGODA_ASSIGN_OR_RETURN(o.schedule, parse_schedule(c.schedule_time_zone, c.schedule));
    }
    return o;
}

TrafficController::TrafficController(Router& r, ControllerOptions o)
    : r_(r), o_(std::move(o)), breaker_(o_.breaker) {
    real_start_ = std::chrono::steady_clock::now();
    sched_last_ = schedule_now();
}

TrafficController::~TrafficController() { stop(); }

void TrafficController::start() {
    r_.add_admin_route("/admin/rollout",
                       [this](const std::string& m, const json& b) { return admin(m, b); });
    r_.add_metrics_source([this] { return metrics_text(); });
    thread_ = std::thread([this] {
        while (!stopping_.load()) {
            tick();
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
    });
}

void TrafficController::stop() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
    for (auto& t : prewarms_) t.join();
    prewarms_.clear();
}

int64_t TrafficController::schedule_now() const {
    const double real =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - real_start_).count();
    const int64_t start = o_.clock_start != 0
                              ? o_.clock_start
                              : std::chrono::duration_cast<std::chrono::seconds>(
                                    std::chrono::system_clock::now().time_since_epoch() -
                                    std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                        std::chrono::duration<double>(real)))
                                    .count();
    return start + int64_t(real * o_.clock_scale);
}

void TrafficController::record(const std::string& kind, json detail) {
    detail["mode"] = mode_name(mode_);
    detail["state"] = state_name(state_);
    detail["source"] = source_;
    detail["target"] = target_;
    if (o_.dry_run) detail["dry_run"] = true;
    detail["at_s"] = r_.now_s();
    history_.push_back(detail);
    if (history_.size() > 100) history_.erase(history_.begin());
    r_.audit(kind, detail);
}

// Weights with `pool` at pct and the other primary pools sharing the rest in proportion to
// their current weights (or, when they have none, the switch's source taking it all).
std::map<std::string, double> TrafficController::with_share(const std::string& pool,
                                                            double pct) const {
    auto w = r_.weights();
    double others = 0;
    for (const auto& [k, v] : w) others += k == pool ? 0 : v;
    for (auto& [k, v] : w) {
        if (k == pool) {
            v = pct;
        } else if (others > 0) {
            v = v / others * (100 - pct);
        } else {
            v = k == (last_source_.empty() ? source_ : last_source_) ? 100 - pct : 0;
        }
    }
    double sum = 0;
    for (const auto& [k, v] : w) sum += v;
    if (std::abs(sum - 100) > 1e-6 && !w.empty()) {  // no source to give the rest to
        const double share = (100 - pct) / double(w.size() - 1);
        for (auto& [k, v] : w) v = k == pool ? pct : share;
    }
    return w;
}

Status TrafficController::set(std::map<std::string, double> w, const std::string& reason) {
    if (o_.dry_run) return ok_status();
    return r_.set_weights(w, reason);
}

Status TrafficController::shift(const std::string& pool, double percent,
                                const std::string& reason) {
    std::lock_guard lock(mu_);
    const auto w = r_.weights();
    if (w.count(pool) == 0) {
        return make_error(ErrorCode::kInvalidArgument, "no primary pool named '{}'", pool);
    }
    if (state_ == State::kPaused && mode_ == Mode::kSwitch && pool == target_) {
        deferred_ = percent;
        record("rollout_deferred", {{"percent", percent}, {"reason", reason}});
        return ok_status();
    }
    if (state_ == State::kRolledBack && mode_ == Mode::kSwitch && pool == target_) {
        record("rollout_skipped",
               {{"percent", percent},
                {"reason", reason + "; the switch was rolled back (resume or promote by hand)"}});
        return ok_status();
    }
    const bool fresh = mode_ != Mode::kSwitch || pool != target_ || state_ != State::kRunning;
    if (fresh) {
        before_ = w;
        std::string src;
        double best = -1;
        for (const auto& [k, v] : w) {
            if (k != pool && v > best) src = k, best = v;
        }
        source_ = src;
        target_ = pool;
        mode_ = Mode::kSwitch;
        breaker_ = Breaker(o_.breaker);
        last_compared_ = json();
        windows_judged_ = windows_compared_ = 0;
    }
    goal_ = percent;
    state_ = State::kRunning;
    window_start_ = r_.now_s();
    PAGODA_TRY(set(with_share(pool, percent), reason));
    record("rollout_step", {{"percent", percent}, {"reason", reason}, {"weights", r_.weights()}});
    if (percent >= 100) {
        state_ = State::kDone;
        last_source_ = source_;
        record("rollout_done", {{"reason", reason}});
    }
    return ok_status();
}

Status TrafficController::reverse(const std::string& reason) {
    std::string back;
    {
        std::lock_guard lock(mu_);
        back = last_source_.empty() ? source_ : last_source_;
    }
    if (back.empty()) {
        return make_error(ErrorCode::kInvalidArgument, "nothing to reverse: no switch has run");
    }
    return shift(back, 100, reason + " (reverse)");
}

Status TrafficController::canary(const std::string& pool, double percent,
                                 const std::string& reason) {
    if (!(percent > 0 && percent < 100)) {
        return make_error(ErrorCode::kInvalidArgument,
                          "a canary's weight must be between 0% and 100%, got {}%", percent);
    }
    std::lock_guard lock(mu_);
    const auto w = r_.weights();
    if (w.count(pool) == 0) {
        return make_error(ErrorCode::kInvalidArgument, "no primary pool named '{}'", pool);
    }
    if (mode_ != Mode::kIdle && (state_ == State::kRunning || state_ == State::kPaused)) {
        return make_error(ErrorCode::kConflict, "a {} is {}: finish or abort it first",
                          mode_name(mode_), state_name(state_));
    }
    before_ = w;
    std::string src;
    double best = -1;
    for (const auto& [k, v] : w) {
        if (k != pool && v > best) src = k, best = v;
    }
    mode_ = Mode::kCanary;
    state_ = State::kRunning;
    source_ = src;
    target_ = pool;
    goal_ = percent;
    canary_start_ = window_start_ = r_.now_s();
    last_verdict_ = json();
    PAGODA_TRY(set(with_share(pool, percent), reason));
    record("canary_start", {{"percent", percent}, {"reason", reason}});
    return ok_status();
}

Status TrafficController::pause(const std::string& reason) {
    std::lock_guard lock(mu_);
    if (state_ != State::kRunning) {
        return make_error(ErrorCode::kConflict, "nothing running to pause (state {})",
                          state_name(state_));
    }
    state_ = State::kPaused;
    record("rollout_pause", {{"reason", reason}, {"by", "human"}});
    return ok_status();
}

Status TrafficController::resume(const std::string& reason) {
    std::lock_guard lock(mu_);
    if (state_ != State::kPaused && state_ != State::kRolledBack) {
        return make_error(ErrorCode::kConflict, "nothing paused or rolled back (state {})",
                          state_name(state_));
    }
    state_ = State::kRunning;
    window_start_ = r_.now_s();
    breaker_ = Breaker(o_.breaker);
    const double pct = deferred_.value_or(goal_);
    deferred_.reset();
    goal_ = pct;
    PAGODA_TRY(set(with_share(target_, pct), reason));
    record("rollout_resume", {{"reason", reason}, {"percent", pct}});
    return ok_status();
}

Status TrafficController::promote(const std::string& reason) {
    std::lock_guard lock(mu_);
    if (target_.empty()) return make_error(ErrorCode::kConflict, "nothing to promote");
    PAGODA_TRY(set(with_share(target_, 100), reason));
    state_ = mode_ == Mode::kCanary ? State::kPromoted : State::kDone;
    last_source_ = source_;
    record(mode_ == Mode::kCanary ? "canary_promote" : "rollout_promote", {{"reason", reason}});
    return ok_status();
}

Status TrafficController::abort(const std::string& reason) {
    std::lock_guard lock(mu_);
    if (before_.empty()) return make_error(ErrorCode::kConflict, "nothing to abort");
    PAGODA_TRY(set(before_, reason));
    state_ = State::kAborted;
    record("rollout_abort", {{"reason", reason}, {"weights", before_}});
    return ok_status();
}

void TrafficController::tick() {
    std::lock_guard lock(mu_);
    run_schedule();
    judge();
}

void TrafficController::run_schedule() {
    if (!o_.schedule) return;
    const int64_t now = schedule_now();
    const auto fire = due(*o_.schedule, sched_last_, now);
    sched_last_ = now;
    for (const auto& [t, e] : fire) {
        const std::string reason = fmt::format("schedule '{}'", e->text);
        mu_.unlock();  // the actions take the lock themselves
        Status s = ok_status();
        switch (e->action) {
            case ScheduleEntry::Action::kPrewarm:
                if (o_.prewarm) {
                    o_.prewarm(e->pool);
                } else {
                    prewarms_.emplace_back([this, pool = e->pool] { r_.prewarm_pool(pool); });
                }
                r_.audit("schedule_prewarm", {{"pool", e->pool}, {"reason", reason}});
                break;
            case ScheduleEntry::Action::kShift: s = shift(e->pool, e->percent, reason); break;
            case ScheduleEntry::Action::kReverse: s = reverse(reason); break;
        }
        mu_.lock();
        if (!s) log_error("schedule_action entry=\"{}\" error=\"{}\"", e->text, s.error().message);
    }
}

void TrafficController::judge() {
    if (state_ != State::kRunning && state_ != State::kPaused) return;
    const double now = r_.now_s();
    // The window is on the schedule's clock: at --schedule-clock-scale 60 a 30 s window
    // is half a second of real traffic, as the switch it judges runs 60x too.
    if ((now - window_start_) * o_.clock_scale < o_.window_s) return;
    if (mode_ == Mode::kSwitch) judge_switch(now);
    if (mode_ == Mode::kCanary) judge_canary_arm(now);
}

void TrafficController::judge_switch(double now) {
    const auto src = r_.arm_samples(source_, window_start_);
    const auto tgt = r_.arm_samples(target_, window_start_);
    window_start_ = now;
    const WindowResult w = compare_window(src, tgt, o_.breaker);
    last_window_ = {{"evidence", w.evidence}, {"worst", w.worst}, {"worst_ratio", w.worst_ratio}};
    ++windows_judged_;
    if (w.verdict != WindowVerdict::kNoData) {  // the last window with both arms compared
        last_compared_ = last_window_;
        last_compared_["at_s"] = now;
        ++windows_compared_;
    }
    const BreakerAction a = breaker_.feed(w);
    if (a == BreakerAction::kNone) return;
    json detail = {{"window", last_window_}, {"threshold", o_.breaker.threshold}};
    if (a == BreakerAction::kPause) {
        state_ = State::kPaused;
        record("breaker_pause", detail);
    } else if (a == BreakerAction::kResume) {
        state_ = State::kRunning;
        record("breaker_resume", detail);
        if (deferred_) {
            goal_ = *deferred_;
            deferred_.reset();
            if (set(with_share(target_, goal_), "breaker resume: deferred step")) {
                record("rollout_step", {{"percent", goal_}, {"weights", r_.weights()}});
            }
        }
    } else {
        (void)set(before_, "breaker rollback");
        state_ = State::kRolledBack;
        detail["weights"] = before_;
        record("breaker_rollback", detail);
        log_error("alert=RolloutRolledBack target={} worst={} ratio={:.2f}", target_, w.worst,
                  w.worst_ratio);
    }
}

void TrafficController::judge_canary_arm(double now) {
    if (state_ != State::kRunning) return;
    window_start_ = now;
    const auto base = r_.arm_samples(source_, canary_start_);
    const auto cand = r_.arm_samples(target_, canary_start_);
    const CanaryVerdict v = judge_canary(base, cand, o_.canary);
    last_verdict_ = {{"verdict", v.verdict}, {"reason", v.reason}, {"evidence", v.evidence}};
    if (v.verdict == "wait") return;
    json out = last_verdict_;
    out["baseline_pool"] = source_;
    out["candidate_pool"] = target_;
    out["percent"] = goal_;
    if (v.verdict == "rollback") {
        (void)set(before_, "canary rollback");
        state_ = State::kRolledBack;
        record("canary_rollback", out);
    } else {
        (void)set(with_share(target_, 100), "canary promote");
        state_ = State::kPromoted;
        last_source_ = source_;
        record("canary_promote", out);
    }
    if (o_.on_verdict) o_.on_verdict(out);
}

json TrafficController::status() const {
    std::lock_guard lock(mu_);
    json j = {{"mode", mode_name(mode_)},
              {"state", state_name(state_)},
              {"source", source_},
              {"target", target_},
              {"percent", goal_},
              {"weights", r_.weights()},
              {"dry_run", o_.dry_run},
              {"last_window", last_window_},
              {"last_compared_window", last_compared_},
              {"windows_judged", windows_judged_},
              {"windows_compared", windows_compared_},
              {"last_verdict", last_verdict_},
              {"history", history_}};
    if (deferred_) j["deferred_percent"] = *deferred_;
    if (o_.schedule) {
        json entries = json::array();
        for (const auto& e : o_.schedule->entries) entries.push_back(e.text);
        j["schedule"] = {{"time_zone", o_.schedule->time_zone},
                         {"entries", entries},
                         {"clock_unix", schedule_now()},
                         {"clock_scale", o_.clock_scale}};
    }
    return j;
}

std::pair<int, json> TrafficController::admin(const std::string& method, const json& body) {
    if (method == "GET") return {200, status()};
    const std::string action = body.value("action", "");
    const std::string reason = body.value("reason", "admin");
    Status s = ok_status();
    if (action == "pause") {
        s = pause(reason);
    } else if (action == "resume") {
        s = resume(reason);
    } else if (action == "promote") {
        s = promote(reason);
    } else if (action == "abort") {
        s = abort(reason);
    } else if (action == "shift" || action == "canary") {
        if (!body.contains("pool") || !body["pool"].is_string() || !body.contains("percent") ||
            !body["percent"].is_number()) {
            return {400,
                    {{"error",
                      {{"message", "expected {\"action\": \"" + action +
                                       "\", \"pool\": NAME, \"percent\": N}"}}}}};
        }
        const std::string pool = body["pool"];
        const double pct = body["percent"];
        s = action == "shift" ? shift(pool, pct, reason) : canary(pool, pct, reason);
    } else if (action == "reverse") {
        s = reverse(reason);
    } else {
        return {400,
                {{"error",
                  {{"message",
                    "action must be one of pause, resume, promote, abort, shift, "
                    "canary, reverse"}}}}};
    }
    if (!s) {
        const int code = s.error().code == ErrorCode::kConflict ? 409 : 400;
        return {code, {{"error", {{"message", s.error().message}}}}};
    }
    return {200, status()};
}

std::string TrafficController::metrics_text() const {
    std::lock_guard lock(mu_);
    metrics::TextWriter w;
    w.family("pagoda_router_rollout_state", "gauge",
             "1 for the traffic controller's current mode and state");
    w.sample("pagoda_router_rollout_state",
             {{"mode", mode_name(mode_)}, {"state", state_name(state_)}, {"target", target_}}, 1);
    return w.text();
}

}  // namespace pagoda::router
