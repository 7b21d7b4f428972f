// PoolSizer on synthetic signal series: the forecast's lead, hysteresis, cooldowns,
// min/max bounds, scale-to-zero and wake-up, and configuration errors.
#include "control/sizing/pool_sizer.h"

#include <gtest/gtest.h>

namespace pagoda::control {
namespace {

PoolSizingConfig base() {
    PoolSizingConfig c;
    c.min_replicas = 1;
    c.max_replicas = 8;
    c.replica_rps = 10;  // at 0.7 utilisation: 7 req/s per replica
    c.cold_start_s = 120;
    c.up_cooldown_s = 30;
    c.down_cooldown_s = 60;
    c.down_stabilisation_s = 100;
    c.idle_to_zero_s = 300;
    return c;
}

// Runs decisions every `dt` seconds over `rates` (one per tick), applying each; returns the
// replica count after each tick.
std::vector<int> run(PoolSizer& p, const std::vector<double>& rates, double dt, int start,
                     const std::vector<double>& forecast_each = {}) {
    std::vector<int> out;
    int cur = start;
    for (size_t i = 0; i < rates.size(); ++i) {
        PoolSignals s;
        s.now_s = double(i) * dt;
        s.current = cur;
        s.rate_rps = rates[i];
        if (!forecast_each.empty()) {
            s.forecast_rps.assign(
                forecast_each.begin() + long(std::min(i, forecast_each.size() - 1)),
                forecast_each.end());
            s.forecast_step_s = dt;
        }
        SizingDecision d = p.decide(s);
        p.applied(d, s.now_s);
        cur = d.desired;
        out.push_back(cur);
    }
    return out;
}

TEST(PoolSizer, LoadNeedAtTheTargetUtilisation) {
    PoolSizer p(base());
    EXPECT_EQ(p.need_for_rate(7), 1);
    EXPECT_EQ(p.need_for_rate(7.01), 2);
    EXPECT_EQ(p.need_for_rate(21), 3);
    EXPECT_EQ(p.need_for_rate(0), 0);
    PoolSignals s;
    s.current = 1;
    s.rate_rps = 20;
    SizingDecision d = p.decide(s);
    EXPECT_EQ(d.desired, 3);
    EXPECT_EQ(d.reason, "load");
    EXPECT_EQ(d.inputs["need_load"], 3);
}

TEST(PoolSizer, TheForecastScalesUpAheadByTheColdStart) {
    // A rise to 28 req/s (4 replicas) at t = 300 s, forecast exactly; ticks of 60 s and a
    // 120 s cold start: the pool asks for 4 at t = 180 (the rise is within lead + one step).
    std::vector<double> rate(10, 5.0), fc(10, 5.0);
    for (size_t i = 5; i < 10; ++i) rate[i] = fc[i] = 28;
    PoolSizer with(base());
    const std::vector<int> ahead = run(with, rate, 60, 1, fc);
    EXPECT_EQ(ahead[2], 1);
    EXPECT_EQ(ahead[3], 4);  // t = 180: 120 s before the rise
    PoolSizer without(base());
    const std::vector<int> late = run(without, rate, 60, 1);
    EXPECT_EQ(late[4], 1);
    EXPECT_EQ(late[5], 4);  // only when the rate arrives
}

TEST(PoolSizer, HysteresisKeepsASmallDipFromFlapping) {
    // 4 replicas serve 28 req/s; a dip to 20 req/s would fit 3 at 0.7 (21) but not with the
    // 15% headroom (3 x 7 x 0.85 = 17.85): no scale-down. A dip to 15 does scale down.
    PoolSizer p(base());
    std::vector<double> dip(10, 20.0);
    for (int n : run(p, dip, 60, 4)) EXPECT_EQ(n, 4);
    PoolSizer q(base());
    const std::vector<int> deeper = run(q, std::vector<double>(10, 15.0), 60, 4);
    EXPECT_EQ(deeper[0], 4);  // t = 0: the lower need starts its stabilisation window
    EXPECT_EQ(deeper[1], 4);  // t = 60 < 100 s
    EXPECT_EQ(deeper[2], 3);  // t = 120: held 120 s; one replica per step
    EXPECT_EQ(deeper.back(), 3);
}

TEST(PoolSizer, CooldownsSpaceTheSteps) {
    PoolSizingConfig c = base();
    c.down_stabilisation_s = 0;
    c.down_cooldown_s = 100;
    PoolSizer p(c);
    // From 8 at a rate that needs 1: one step down per cooldown (every other 60 s tick).
    const std::vector<int> n = run(p, std::vector<double>(8, 1.0), 60, 8);
    EXPECT_EQ(n, (std::vector<int>{7, 7, 6, 6, 5, 5, 4, 4}));
    // Up cooldown: two rises 10 s apart; the second waits.
    PoolSizer q(base());
    PoolSignals s;
    s.current = 1;
    s.rate_rps = 13;
    SizingDecision d = q.decide(s);
    ASSERT_EQ(d.desired, 2);
    q.applied(d, 0);
    s.now_s = 10;
    s.current = 2;
    s.rate_rps = 30;
    d = q.decide(s);
    EXPECT_EQ(d.desired, 2);
    EXPECT_EQ(d.reason, "hold:up-cooldown");
    s.now_s = 31;
    EXPECT_EQ(q.decide(s).desired, 5);
}

TEST(PoolSizer, BoundsHoldAndLiveSignalsScaleUp) {
    PoolSizingConfig c = base();
    c.min_replicas = 2;
    c.max_replicas = 3;
    c.ttft_slo_s = 0.8;
    PoolSizer p(c);
    PoolSignals s;
    s.current = 2;
    s.rate_rps = 100;  // needs 15
    SizingDecision d = p.decide(s);
    EXPECT_EQ(d.desired, 3);
    EXPECT_EQ(d.reason, "load,max");
    PoolSizer q(c);
    s.rate_rps = 0.5;
    s.waiting = 20;  // 10 per replica, target 4: up to min(2x, ceil(2 x 10 / 4)) = 4 -> max 3
    d = q.decide(s);
    EXPECT_EQ(d.desired, 3);
    EXPECT_EQ(d.reason, "queue,max");
    PoolSizer r(c);
    s.waiting = 0;
    s.p99_ttft_s = 1.2;
    EXPECT_EQ(r.decide(s).reason, "ttft");
    PoolSizer m(c);
    s.p99_ttft_s = 0.1;
    s.current = 1;  // below the minimum
    d = m.decide(s);
    EXPECT_EQ(d.desired, 2);
    EXPECT_EQ(d.reason, "min");
}

TEST(PoolSizer, ScaleToZeroAfterIdleAndWakeOnTheFirstRequest) {
    PoolSizingConfig c = base();
    c.min_replicas = 0;
    c.down_stabilisation_s = 0;
    c.down_cooldown_s = 0;
    PoolSizer p(c);
    PoolSignals s;
    s.current = 1;
    s.since_request_s = 100;  // idle, but not long enough
    EXPECT_EQ(p.decide(s).desired, 1);
    s.since_request_s = 301;
    s.forecast_rps = {0, 0, 3};  // traffic forecast within the lead: stays up
    s.forecast_step_s = 60;
    EXPECT_EQ(p.decide(s).desired, 1);
    s.forecast_rps.clear();
    SizingDecision d = p.decide(s);
    EXPECT_EQ(d.desired, 0);
    EXPECT_EQ(d.reason, "idle");
    p.applied(d, 0);
    // At zero, one request waiting (held by the router): wake to one at once, no cooldown.
    s.current = 0;
    s.since_request_s = 0;
    s.waiting = 1;
    d = p.decide(s);
    EXPECT_EQ(d.desired, 1);
    EXPECT_EQ(d.reason.rfind("wake", 0), 0u) << d.reason;
    // A forecast rise also wakes it, ahead of the traffic, to the forecast's need.
    PoolSizer f(c);
    PoolSignals z;
    z.current = 0;
    z.since_request_s = 1e9;
    z.forecast_rps = {0, 0, 20};
    z.forecast_step_s = 60;
    EXPECT_EQ(f.decide(z).desired, 3);
    z.forecast_rps = {0, 0, 0, 0, 20};  // beyond the 120 s lead: stays at zero
    EXPECT_EQ(f.decide(z).desired, 0);
}

TEST(PoolSizer, ConfigErrorsSayWhatIsAllowed) {
    PoolSizingConfig c = base();
    c.max_replicas = 0;
    EXPECT_NE(c.validate().error().message.find("max_replicas"), std::string::npos);
    c = base();
    c.target_utilisation = 1.5;
    EXPECT_NE(c.validate().error().message.find("(0, 1]"), std::string::npos);
    EXPECT_TRUE(base().validate().ok());
}

}  // namespace
}  // namespace pagoda::control
