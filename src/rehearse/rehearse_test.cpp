// The virtual-clock fleet: a static fleet serves a steady load within the SLO and loses
// nothing; drain-safe scale-down and a kill lose no accepted request; a pool sized from
// zero holds requests while it wakes instead of refusing them; the built-in day's shape.
#include "rehearse/rehearse.h"

#include <gtest/gtest.h>

#include "model/test_model.h"
#include "rehearse/day.h"
#include "rehearse/fleet_sim.h"

namespace pagoda::rehearse {
namespace {

model::sim::PerfModel a100() {
    auto gpu = model::sim::find_gpu("a100-80g");
    auto shape = model::find_shape("llama-3-8b");
    return *model::sim::PerfModel::create(*gpu, model::sim::SimShape::of(*shape), 1,
                                          model::sim::WeightType::kBf16, kernels::KvDtype::kBF16,
                                          gpu->efficiency);
}

TEST(FleetSim, AStaticFleetServesASteadyLoad) {
    const auto perf = a100();
    const auto load = steady_load(2, 300, 1, 8192);
    ArmPlan arm;
    arm.name = "static";
    arm.replicas = 2;
    auto r = simulate(perf, 8192, load, {300, 1}, arm, {}, {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->requests, int64_t(load.size()));
    EXPECT_EQ(r->lost, 0);
    EXPECT_EQ(r->refused, 0);
    EXPECT_GT(r->slo_attainment, 0.95);
    EXPECT_NEAR(r->replica_s, 600, 1);
    // Overloaded (one replica, 40 req/s): the SLO fails, nothing is lost.
    arm.replicas = 1;
    auto o = simulate(perf, 8192, steady_load(40, 60, 1, 8192), {60, 1}, arm, {}, {});
    ASSERT_TRUE(o.ok());
    EXPECT_LT(o->slo_attainment, 0.5);
    EXPECT_EQ(o->lost, 0);
}

TEST(FleetSim, ScaleDownDrainsAndAKillResumesStreams) {
    const auto perf = a100();
    // A burst then quiet: the sizer goes 6 -> 1 while streams run; a kill at 00:01.
    std::vector<Arrival> load = steady_load(20, 120, 3, 8192);
    for (const Arrival& a : steady_load(0.5, 480, 4, 8192)) {
        Arrival b = a;
        b.t_s += 120;
        load.push_back(b);
    }
    ArmPlan arm;
    arm.name = "control";
    arm.replicas = 6;
    arm.sizing = true;
    arm.sizer.min_replicas = 1;
    arm.sizer.max_replicas = 6;
    arm.sizer.replica_rps = 4;
    arm.sizer.down_stabilisation_s = 10;
    arm.sizer.down_cooldown_s = 5;
    arm.cold_start_day_s = 30;
    std::vector<Fault> faults = {{Fault::Kind::kKill, 60, 0, 1}};
    auto r = simulate(perf, 8192, load, {600, 1}, arm, {}, faults);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->lost, 0);
    EXPECT_EQ(r->refused, 0);
    EXPECT_GT(r->resumed, 0);
    EXPECT_GE(r->actions, 4);  // at least 6 -> 2
    EXPECT_LT(r->replica_s, 6 * 600 * 0.6);
}

TEST(FleetSim, APoolAtZeroHoldsRequestsWhileItWakes) {
    const auto perf = a100();
    std::vector<Arrival> load;
    for (int i = 0; i < 20; ++i) load.push_back({100.0 + i * 0.1, 200, 50, false});
    ArmPlan arm;
    arm.name = "zero";
    arm.replicas = 0;
    arm.sizing = true;
    arm.sizer.min_replicas = 0;
    arm.sizer.max_replicas = 2;
    arm.sizer.idle_to_zero_s = 30;
    arm.cold_start_day_s = 20;
    arm.hold_timeout_day_s = 60;
    auto r = simulate(perf, 8192, load, {300, 1}, arm, {}, {});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->refused, 0);
    EXPECT_EQ(r->lost, 0);
    EXPECT_EQ(r->requests, 20);
    EXPECT_GT(r->p99_ttft_s, 19);  // held through the cold start
    // A hold shorter than the wake-up: 503 (refused), never lost.
    arm.hold_timeout_day_s = 5;
    auto s = simulate(perf, 8192, load, {300, 1}, arm, {}, {});
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->refused, 20);
    EXPECT_EQ(s->lost, 0);
}

TEST(Day, TheBuiltinDayHasItsShape) {
    EXPECT_LT(builtin_shape(4 * 3600), 0.1);
    EXPECT_NEAR(builtin_shape(11 * 3600), 1.0, 1e-9);
    EXPECT_LT(builtin_shape(12 * 3600), builtin_shape(11 * 3600));  // lunch dip
    EXPECT_LT(builtin_shape(21 * 3600), 0.4);
    const Day d = builtin_day({10, 96, 1, 3, 8192});
    ASSERT_FALSE(d.arrivals.empty());
    int longs = 0;
    for (const Arrival& a : d.arrivals) longs += a.long_prompt;
    EXPECT_NEAR(double(longs) / double(d.arrivals.size()), 0.3, 0.03);
    EXPECT_NEAR(d.peak_hour_rps, 10, 0.5);
    EXPECT_LT(d.arrivals.back().t_s, 900);
}

TEST(Slo, ParsesAndRefuses) {
    auto s = parse_slo("p99_ttft_ms<500,p99_tpot_ms<80");
    ASSERT_TRUE(s.ok());
    EXPECT_DOUBLE_EQ(s->ttft_s, 0.5);
    EXPECT_DOUBLE_EQ(s->tpot_s, 0.08);
    EXPECT_NE(parse_slo("p50_ttft<3").error().message.find("allowed"), std::string::npos);
    EXPECT_FALSE(parse_slo("p99_ttft_ms<abc").ok());
}

}  // namespace
}  // namespace pagoda::rehearse
