// Trace replay: speed, rate and length scales, and --scale, applied to a trace's plan.
#include <gtest/gtest.h>

#include <cstdio>

#include "bench/scenario.h"
#include "bench/workload.h"

namespace pagoda::bench {
namespace {

TEST(Trace, SpeedRateAndLengthScalesAndScaleApplyToTraces) {
    const std::string path = ::testing::TempDir() + "/pagoda_trace_test.jsonl";
    {
        std::FILE* f = std::fopen(path.c_str(), "w");
        std::fputs(
            "{\"timestamp\": 100, \"input_len\": 1000, \"output_len\": 10}\n"
            "{\"timestamp\": 104, \"input_len\": 14000, \"output_len\": 300}\n"
            "{\"timestamp\": 108, \"prompt\": \"hello\", \"output_len\": 1}\n",
            f);
        std::fclose(f);
    }
    Scenario s;
    s.arrival.kind = Arrival::Kind::kTrace;
    s.arrival.trace = path;
    s.classes = {RequestClass{}};
    s.arrival.trace_speed = 2;
    s.arrival.trace_rate_scale = 2;
    s.arrival.trace_length_scale = 0.1;
    auto plan = make_plan(s);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    ASSERT_EQ(plan->size(), 3u);
    EXPECT_DOUBLE_EQ((*plan)[1].at_s, 1.0) << "4 s of trace at speed 2 and rate x2";
    EXPECT_EQ((*plan)[1].input_len, 1400);
    EXPECT_EQ((*plan)[1].output_len, 30);
    EXPECT_EQ((*plan)[2].output_len, 1) << "never below one token";
    EXPECT_TRUE((*plan)[2].has_prompt) << "a prompt given as text stays";
    // --scale F scales a trace's rates and lengths too, as it does a scenario's.
    Scenario t = s;
    t.arrival.trace_speed = 1;
    t.arrival.trace_rate_scale = 1;
    t.arrival.trace_length_scale = 1;
    t.scale(0.5);
    auto scaled = make_plan(t);
    ASSERT_TRUE(scaled.ok());
    EXPECT_DOUBLE_EQ((*scaled)[1].at_s, 8.0);
    EXPECT_EQ((*scaled)[1].input_len, 7000);
    EXPECT_NE(t.hash(), s.hash());
}

}  // namespace
}  // namespace pagoda::bench
