// Trace replay: speed, rate and length scales, and --scale, applied to a trace's plan.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include "bench/scenario.h"
#include "bench/trace_formats.h"
#include "bench/workload.h"

namespace pagoda::bench {
namespace {

// A trace scenario over `text`, written to a file named `name` in the test directory.
Scenario trace_scenario(const std::string& name, const char* text) {
    const std::string path = ::testing::TempDir() + "/" + name;
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(text, f);
    std::fclose(f);
    Scenario s;
    s.arrival.kind = Arrival::Kind::kTrace;
    s.arrival.trace = path;
    s.classes = {RequestClass{}};
    return s;
}

TEST(Trace, SpeedRateAndLengthScalesAndScaleApplyToTraces) {
    Scenario s = trace_scenario("pagoda_trace_test.jsonl",
                                "{\"timestamp\": 100, \"input_len\": 1000, \"output_len\": 10}\n"
                                "{\"timestamp\": 104, \"input_len\": 14000, \"output_len\": 300}\n"
                                "{\"timestamp\": 108, \"prompt\": \"hello\", \"output_len\": 1}\n");
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

Result<Trace> parse(const std::string& text, const std::string& model = "") {
    std::istringstream in(text);
    return parse_trace(in, "t", TraceReadOptions{model});
}

TEST(Trace, TimeWindowAndScalesOnACsvTrace) {
    Scenario s = trace_scenario("pagoda_window.csv",
                                "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                "2024-05-10 00:00:00,100,10\n"
                                "2024-05-10 00:10:00,200,20\n"
                                "2024-05-10 00:20:00,300,30\n"
                                "2024-05-10 00:40:00,400,40\n");
    s.arrival.trace_window_from_s = 600;  // 10m-30m
    s.arrival.trace_window_to_s = 1800;
    s.arrival.trace_speed = 10;
    s.arrival.trace_length_scale = 0.5;
    auto plan = make_plan(s);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    ASSERT_EQ(plan->size(), 2u);
    EXPECT_DOUBLE_EQ((*plan)[0].at_s, 0.0) << "the replay starts at the window";
    EXPECT_DOUBLE_EQ((*plan)[1].at_s, 60.0) << "10 minutes at speed 10";
    EXPECT_EQ((*plan)[1].input_len, 150);
    EXPECT_EQ((*plan)[1].output_len, 15);
    s.arrival.trace_window_from_s = 3000;
    s.arrival.trace_window_to_s = 0;
    auto empty = make_plan(s);
    ASSERT_FALSE(empty.ok());
    EXPECT_NE(empty.error().message.find("within --time-window"), std::string::npos);
}

TEST(TraceFormats, AzureCsv) {
    auto t = parse(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n");
    ASSERT_TRUE(t.ok()) << t.error().message;
    EXPECT_EQ(t->format, TraceFormat::kAzure);
    ASSERT_EQ(t->records.size(), 2u);
    EXPECT_NEAR(t->records[1].ts_s - t->records[0].ts_s, 4.314579, 1e-6);
    EXPECT_EQ(t->records[0].input_len, 374);
    EXPECT_EQ(t->records[1].output_len, 109);
    EXPECT_NEAR(t->records[0].ts_s, 1700158546.68059, 1e-3);  // UTC
}

TEST(TraceFormats, BurstGptCsvWithModelFilter) {
    const std::string text =
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n"
        "45,GPT-4,1087,0,1087,Conversation log\n"
        "118,ChatGPT,417,0,417,Conversation log\n"
        "130,ChatGPT,1360,221,1581,API log\n";
    auto t = parse(text, "ChatGPT");
    ASSERT_TRUE(t.ok()) << t.error().message;
    EXPECT_EQ(t->format, TraceFormat::kBurstGpt);
    ASSERT_EQ(t->records.size(), 2u);
    EXPECT_EQ(t->other_model, 1);
    EXPECT_EQ(t->zero_output, 1);
    EXPECT_EQ(t->records[1].input_len, 1360);
    EXPECT_DOUBLE_EQ(t->records[1].ts_s, 130);
    auto all = parse(text);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all->zero_output, 2);
    EXPECT_FALSE(parse(text, "Claude").ok());
}

TEST(TraceFormats, MooncakeJsonl) {
    auto t = parse(
        "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 10, \"hash_ids\": [1, 2, "
        "3]}\n"
        "{\"timestamp\": 2500, \"input_length\": 700, \"output_length\": 5, \"hash_ids\": [1, "
        "4]}\n");
    ASSERT_TRUE(t.ok()) << t.error().message;
    EXPECT_EQ(t->format, TraceFormat::kMooncake);
    EXPECT_DOUBLE_EQ(t->records[1].ts_s, 2.5);
    EXPECT_EQ(t->records[1].hash_ids, (std::vector<int64_t>{1, 4}));
}

TEST(TraceFormats, BadInputNamesFileLineAndProblem) {
    struct Case {
        const char* text;
        const char* want;
    };
    const Case cases[] = {
        {"time,tokens\n1,2\n", "t:1: not a trace"},
        {"TIMESTAMP,ContextTokens,GeneratedTokens,Extra\n", "t:1: unknown column 'Extra'"},
        {"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,10,5\n"
         "2023-11-16 18:15:40,10,5\n",
         "t:3: timestamps must be in order"},
        {"TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,10,5\n", "t:2: TIMESTAMP"},
        {"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,0,5\n",
         "t:2: the input length must be at least 1"},
        {"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,-3,5\n",
         "t:2: ContextTokens"},
        {"{\"timestamp\": 1, \"input_len\": 5, \"output_len\": 0}\n", "t:1: needs \"output_len\""},
        {"{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 2, \"hash_ids\": \"x\"}\n",
         "t:1: \"hash_ids\" must be a list"},
        {"\n\n", "t: no requests"},
    };
    for (const Case& c : cases) {
        auto t = parse(c.text);
        ASSERT_FALSE(t.ok()) << c.text;
        EXPECT_NE(t.error().message.find(c.want), std::string::npos)
            << t.error().message << " | want " << c.want;
    }
}

TEST(TraceFormats, MooncakePromptsShareTheirPrefixBlocks) {
    Scenario s = trace_scenario(
        "pagoda_mooncake.jsonl",
        "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 10, \"hash_ids\": [1, "
        "2, 3]}\n"
        "{\"timestamp\": 1000, \"input_length\": 1030, \"output_length\": 5, \"hash_ids\": [1, "
        "2, 9]}\n"
        "{\"timestamp\": 2000, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [7, "
        "8]}\n");
    s.arrival.trace_length_scale = 0.1;  // blocks of 51 tokens
    auto plan = make_plan(s);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    EXPECT_EQ((*plan)[0].block_tokens, 51);
    // About four characters a token.
    PromptBuilder b(
        [](const std::string& t) -> Result<int64_t> { return int64_t(1 + (t.size() + 3) / 4); });
    ASSERT_TRUE(fill_prompts(s, *plan, b, nullptr, nullptr).ok());
    const std::string &p0 = (*plan)[0].prompt, &p1 = (*plan)[1].prompt, &p2 = (*plan)[2].prompt;
    size_t common01 = 0, common02 = 0;
    while (common01 < std::min(p0.size(), p1.size()) && p0[common01] == p1[common01]) ++common01;
    while (common02 < std::min(p0.size(), p2.size()) && p0[common02] == p2[common02]) ++common02;
    EXPECT_GE(common01, size_t(2 * 4 * 45)) << "two shared blocks of ~51 tokens";
    EXPECT_LT(common02, size_t(40)) << "no shared block";
}

}  // namespace
}  // namespace pagoda::bench
