// PoolSizer: the needs, the bounds, hysteresis and cooldowns (pool_sizer.h).
#include "control/sizing/pool_sizer.h"

#include <algorithm>
#include <cmath>

namespace pagoda::control {

Status PoolSizingConfig::validate() const {
    auto bad = [](const std::string& what) {
        return make_error(ErrorCode::kInvalidArgument, "pool sizing: {}", what);
    };
    if (min_replicas < 0) return bad("min_replicas must be >= 0");
    if (max_replicas < std::max(1, min_replicas)) {
        return bad("max_replicas must be >= min_replicas and >= 1");
    }
    if (replica_rps < 0) return bad("replica_rps must be >= 0 (0: size on live signals only)");
    if (!(target_utilisation > 0 && target_utilisation <= 1)) {
        return bad("target_utilisation must be in (0, 1]");
    }
    if (!(target_waiting > 0)) return bad("target_waiting must be > 0");
    if (!(down_headroom >= 0 && down_headroom < 1)) return bad("down_headroom must be in [0, 1)");
    for (double v : {ttft_slo_s, cold_start_s, up_cooldown_s, down_cooldown_s, down_stabilisation_s,
                     idle_to_zero_s}) {
        if (!(v >= 0)) return bad("durations and the TTFT SLO must be >= 0");
    }
    return ok_status();
}

int PoolSizer::need_for_rate(double rps, double headroom) const {
    if (c_.replica_rps <= 0 || rps <= 0) return 0;
    return int(std::ceil(rps / (c_.replica_rps * c_.target_utilisation * headroom) - 1e-9));
}

// The most any forecast step from now to the end of the cold start (and one step more)
// needs: asked for now, a replica is ready only then.
int PoolSizer::forecast_need(const PoolSignals& s) const {
    if (s.forecast_rps.empty() || s.forecast_step_s <= 0) return 0;
    const size_t steps = size_t(std::ceil(c_.cold_start_s / s.forecast_step_s)) + 1;
    double peak = 0;
    for (size_t i = 0; i < std::min(steps, s.forecast_rps.size()); ++i) {
        peak = std::max(peak, s.forecast_rps[i]);
    }
    return need_for_rate(peak);
}

// More replicas when the queue per replica passes its target (in proportion, at most
// double) or the p99 TTFT passes the SLO (one more); 0 otherwise.
int PoolSizer::live_need(const PoolSignals& s, bool& queue_hot) const {
    if (s.current <= 0) return 0;
    const double per = s.waiting / s.current;
    queue_hot = per > c_.target_waiting;
    if (queue_hot) {
        return std::min(2 * s.current, int(std::ceil(s.current * per / c_.target_waiting)));
    }
    if (c_.ttft_slo_s > 0 && s.p99_ttft_s > c_.ttft_slo_s) return s.current + 1;
    return 0;
}

SizingDecision PoolSizer::decide(const PoolSignals& s) {
    SizingDecision d;
    d.current = d.desired = s.current;
    const int f_need = forecast_need(s), l_need = need_for_rate(s.rate_rps);
    bool queue_hot = false;
    const int live = live_need(s, queue_hot);
    d.inputs = {{"rate_rps", s.rate_rps},     {"waiting", s.waiting},
                {"p99_ttft_s", s.p99_ttft_s}, {"since_request_s", s.since_request_s},
                {"need_forecast", f_need},    {"need_load", l_need},
                {"need_live", live},          {"min", c_.min_replicas},
                {"max", c_.max_replicas},     {"forecast_lead_s", c_.cold_start_s}};
    const bool traffic = s.rate_rps > 0 || s.waiting > 0 || s.since_request_s < c_.idle_to_zero_s;
    int want = std::max({f_need, l_need, live, c_.min_replicas});
    std::string why = live > std::max(f_need, l_need) ? (queue_hot ? "queue" : "ttft")
                      : f_need > l_need               ? "forecast"
                                                      : "load";
    if (want == c_.min_replicas && std::max({f_need, l_need, live}) < c_.min_replicas) why = "min";
    if (want == 0 && traffic) want = 1, why = "traffic";
    if (want > c_.max_replicas) want = c_.max_replicas, why += ",max";

    if (s.current == 0 && want > 0) {  // waking a pool at zero does not wait for cooldowns
        below_since_s_ = -1;
        d.desired = want;
        d.reason = "wake:" + why;
        return d;
    }
    if (want > s.current) {
        below_since_s_ = -1;
        if (s.now_s - last_up_s_ < c_.up_cooldown_s) {
            d.reason = "hold:up-cooldown";
        } else {
            d.desired = want;
            d.reason = why;
        }
        return d;
    }
    // Down: the need with headroom (so a small dip does not flap) must stay below.
    int lower =
        std::max({f_need, need_for_rate(s.rate_rps, 1 - c_.down_headroom), live, c_.min_replicas});
    if (lower == 0 && traffic) lower = 1;
    if (lower >= s.current) {
        below_since_s_ = -1;
        d.reason = "hold";
        return d;
    }
    if (below_since_s_ < 0) below_since_s_ = s.now_s;
    if (s.now_s - below_since_s_ < c_.down_stabilisation_s) {
        d.reason = "hold:stabilising";
    } else if (s.now_s - last_change_s_ < c_.down_cooldown_s) {
        d.reason = "hold:down-cooldown";
    } else {
        d.desired = s.current - 1;
        d.reason = lower == 0 ? "idle" : "down";
    }
    return d;
}

void PoolSizer::applied(const SizingDecision& d, double now_s) {
    if (!d.changed()) return;
    if (d.desired > d.current) last_up_s_ = now_s;
    last_change_s_ = now_s;  // a lower need that holds on steps down again after the cooldown
}

}  // namespace pagoda::control
