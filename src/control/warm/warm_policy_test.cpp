// The dynamic warmup tier: levels and windows from synthetic queue series, the window's
// bound, suspension, manual levels, spin budgets and warm-pass intervals, and option errors.
#include "control/warm/warm_policy.h"

#include <gtest/gtest.h>

namespace pagoda::control {
namespace {

std::string levels(WarmPolicy& p, const std::vector<std::pair<int64_t, int64_t>>& series) {
    std::string out;
    for (const auto& [t, q] : series) {
        p.observe(q, t);
        out += warm_level_name(p.level());
        out += " ";
    }
    return out;
}

TEST(WarmPolicy, QueueDepthRaisesLevelsAndTheyDecayAfterTheirWindow) {
    WarmPolicy p;
    // 6 waiting: low for 3 s; 12: medium, window 6 s from then; then quiet.
    EXPECT_EQ(levels(p, {{0, 3}, {1000, 6}, {2000, 12}, {3000, 0}, {7999, 0}, {8000, 0}}),
              "off low medium medium medium off ");
    // A lower level waits for the higher one's window; then the queue decides.
    WarmPolicy q;
    EXPECT_EQ(levels(q, {{0, 25}, {1000, 7}, {12'000, 7}, {12'500, 7}, {16'000, 0}}),
              "high high high low off ");
    EXPECT_EQ(q.until_ms(), 0);
}

TEST(WarmPolicy, TheWindowIsBoundedAndExtendedWhileTheQueueStaysDeep) {
    WarmPolicy p;
    EXPECT_EQ(p.window_ms(8), 4000);
    EXPECT_EQ(p.window_ms(100000), 300'000);  // min(300 s, 0.5 s x depth)
    p.observe(100000, 0);
    EXPECT_EQ(p.until_ms(), 300'000);
    p.observe(30, 200'000);  // still deep: the window only grows
    EXPECT_EQ(p.until_ms(), 300'000);
    p.observe(30, 299'000);
    EXPECT_EQ(p.until_ms(), 314'000);
    EXPECT_EQ(p.level(), WarmLevel::kHigh);
}

TEST(WarmPolicy, SpinBudgetsPerLevel) {
    WarmPolicy p;
    EXPECT_EQ(p.spin_budget(0).count(), 0);
    p.observe(6, 0);
    EXPECT_EQ(p.spin_budget(0).count(), 100'000);
    p.observe(11, 0);
    EXPECT_EQ(p.spin_budget(0).count(), 1'000'000);
    EXPECT_EQ(p.pass_interval().count(), 0) << "no warm passes below high";
    p.observe(21, 0);  // high: for the rest of its window (10.5 s)
    EXPECT_EQ(p.spin_budget(500).count(), 10'000'000);
    EXPECT_EQ(p.pass_interval().count(), 100) << "high: a warm pass every 100 ms of spin";
    p.suspend(true, "shedding", 600);
    EXPECT_EQ(p.pass_interval().count(), 0) << "none while suspended";
}

TEST(WarmPolicy, SuspensionAndManualLevels) {
    WarmPolicy p;
    p.observe(30, 0);
    auto c = p.suspend(true, "shedding", 1000);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->to, WarmLevel::kOff);
    EXPECT_EQ(c->reason, "suspended: shedding");
    p.observe(50, 2000);
    EXPECT_EQ(p.level(), WarmLevel::kOff) << "the queue does not raise it while suspended";
    EXPECT_EQ(p.spin_budget(2000).count(), 0);
    p.suspend(false, "shedding ended", 3000);
    p.observe(50, 3000);
    EXPECT_EQ(p.level(), WarmLevel::kHigh);
    WarmPolicy m;
    m.set_manual(WarmLevel::kMedium, 60'000, 0);
    EXPECT_EQ(levels(m, {{30'000, 0}, {60'000, 0}}), "medium off ");
}

TEST(WarmPolicy, BadOptionsSayWhatIsAllowed) {
    WarmPolicyOptions o;
    o.thresholds = {5, 5, 20};
    EXPECT_NE(o.validate().error().message.find("increasing"), std::string::npos);
    o = {};
    o.thresholds = {-1, 10, 20};
    EXPECT_FALSE(o.validate().ok());
    o = {};
    o.seconds_per_request = 0;
    EXPECT_NE(o.validate().error().message.find("(0, 60]"), std::string::npos);
    o = {};
    o.max_window_s = 1e9;
    EXPECT_FALSE(o.validate().ok());
    o = {};
    o.spin_ms = {5, 100, 1000, -1};
    EXPECT_NE(o.validate().error().message.find("level off must not spin"), std::string::npos);
    o = {};
    o.pass_ms = {0, 0, 5, 100};
    EXPECT_NE(o.validate().error().message.find("0 (no passes) or 10..60000"), std::string::npos);
    o.pass_ms = {50, 0, 0, 100};
    EXPECT_NE(o.validate().error().message.find("level off must not run warm passes"),
              std::string::npos);
    EXPECT_TRUE(WarmPolicyOptions{}.validate().ok());
    EXPECT_FALSE(parse_thresholds("5,10").ok());
    EXPECT_FALSE(parse_thresholds("5,x,20").ok());
    EXPECT_EQ(parse_thresholds("1,2,3").value()[2], 3);
    EXPECT_EQ(parse_spins("0,1,2,-1").value()[3], -1);
    EXPECT_EQ(parse_passes("0,0,50,100").value()[2], 50);
    EXPECT_FALSE(parse_passes("0,0,100").ok());
    EXPECT_FALSE(parse_warm_level("warm").ok());
}

}  // namespace
}  // namespace pagoda::control
