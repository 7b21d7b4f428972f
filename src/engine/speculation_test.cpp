// Unit tests of engine/speculation.h: prompt lookup, the config parser, who may speculate,
// the backoff.
#include "engine/speculation.h"

#include <gtest/gtest.h>

#include "engine/sampler.h"

namespace pagoda::engine {
namespace {

SpeculativeConfig cfg(int k, int max_n = 3, int min_n = 1) {
    return {.num_speculative_tokens = k, .prompt_lookup_max = max_n, .prompt_lookup_min = min_n};
}

TEST(Speculation, ProposesWhatFollowedTheLongestMostRecentMatch) {
    std::vector<int32_t> out;
    // "1 2 3 9 ... 1 2 3 7 ... 2 3": the suffix "2 3" last occurred before 7.
    const std::vector<int32_t> t = {1, 2, 3, 9, 9, 5, 1, 2, 3, 7, 8, 4, 2, 3};
    EXPECT_EQ(propose_ngram(t, cfg(3), 3, out), 3);
    EXPECT_EQ(out, (std::vector<int32_t>{7, 8, 4}));
    // The longer match wins over a more recent shorter one: "1 2 3" -> 9 5 (not 7, after "2 3").
    out.clear();
    const std::vector<int32_t> u = {1, 2, 3, 9, 5, 0, 2, 3, 7, 6, 1, 2, 3};
    EXPECT_EQ(propose_ngram(u, cfg(2), 2, out), 2);
    EXPECT_EQ(out, (std::vector<int32_t>{9, 5}));
    // Limited by max_tokens and by what follows the match.
    out.clear();
    EXPECT_EQ(propose_ngram(u, cfg(8), 1, out), 1);
    out.clear();
    const std::vector<int32_t> r = {4, 4, 4};
    EXPECT_EQ(propose_ngram(r, cfg(4, 2, 2), 4, out), 1);  // "4 4" at 0, then one 4
    EXPECT_EQ(out, (std::vector<int32_t>{4}));
}

TEST(Speculation, NothingBelowTheShortestNgram) {
    std::vector<int32_t> out;
    const std::vector<int32_t> t = {5, 6, 7, 8, 6};
    EXPECT_EQ(propose_ngram(t, cfg(3, 3, 2), 3, out), 0);  // only the 1-gram "6" repeats
    EXPECT_EQ(propose_ngram(t, cfg(3, 3, 1), 3, out), 3);
    EXPECT_EQ(out, (std::vector<int32_t>{7, 8, 6}));
    out.clear();
    EXPECT_EQ(propose_ngram(std::vector<int32_t>{1}, cfg(3), 3, out), 0);
    EXPECT_EQ(propose_ngram(t, cfg(3, 3, 1), 0, out), 0);
}

TEST(Speculation, ConfigIsVllmsJson) {
    auto c = parse_speculative_config(
        R"({"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":3})");
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->num_speculative_tokens, 4);
    EXPECT_EQ(c->prompt_lookup_max, 3);
    EXPECT_EQ(c->prompt_lookup_min, 2);
    EXPECT_FALSE(parse_speculative_config("")->enabled());
    auto back = parse_speculative_config(to_json(*c));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->prompt_lookup_min, 2);
    auto err = [](const std::string& j) {
        auto r = parse_speculative_config(j);
        return r.ok() ? std::string("ok") : r.error().message;
    };
    EXPECT_NE(err(R"({"method":"eagle","num_speculative_tokens":4})").find("supported: \"ngram\""),
              std::string::npos);
    EXPECT_NE(err(R"({"method":"ngram"})").find("'num_speculative_tokens' is missing"),
              std::string::npos);
    EXPECT_NE(err(R"({"method":"ngram","num_speculative_tokens":0})").find("allowed: 1 to 16"),
              std::string::npos);
    EXPECT_NE(err(R"({"method":"ngram","num_speculative_tokens":"4"})").find("must be an integer"),
              std::string::npos);
    EXPECT_NE(err(R"({"method":"ngram","num_speculative_tokens":2,"prompt_lookup_min":4,)"
                  R"("prompt_lookup_max":3})")
                  .find("1 <= min <= max"),
              std::string::npos);
    EXPECT_NE(err(R"({"method":"ngram","num_speculative_tokens":2,"draft":1})")
                  .find("unknown field 'draft'"),
              std::string::npos);
    EXPECT_NE(err("ngram").find("not a JSON object"), std::string::npos);
}

TEST(Speculation, OnlyDeterministicSamplesSpeculate) {
    SamplingParams p;
    p.temperature = 0;
    EXPECT_TRUE(can_speculate(p));
    p.logit_bias = {{3, 5.0f}};
    p.logprobs = 2;
    EXPECT_TRUE(can_speculate(p));  // a fixed bias and reported logprobs keep it a function
    for (auto change : std::vector<void (*)(SamplingParams&)>{
             [](SamplingParams& q) { q.temperature = 0.7f; },
             [](SamplingParams& q) { q.repetition_penalty = 1.1f; },
             [](SamplingParams& q) { q.presence_penalty = 0.5f; },
             [](SamplingParams& q) { q.frequency_penalty = 0.5f; },
             [](SamplingParams& q) { q.min_tokens = 3; }, [](SamplingParams& q) { q.n = 2; }}) {
        SamplingParams q = p;
        change(q);
        EXPECT_FALSE(can_speculate(q));
    }
}

TEST(Speculation, BackoffDoublesAfterMissesAndResets) {
    DraftBackoff b;
    EXPECT_TRUE(b.ready());
    b.verified(0, 4);
    EXPECT_EQ(b.wait, 8);
    EXPECT_EQ(b.limit, 1);  // after a miss, one draft at a time
    for (int i = 0; i < 8; ++i) b.skip();
    EXPECT_TRUE(b.ready());
    b.verified(0, 1);
    EXPECT_EQ(b.wait, 16);
    for (int i = 0; i < 10; ++i) b.verified(0, 1);
    EXPECT_EQ(b.wait, 64);
    b.wait = 0;
    b.verified(1, 1);  // all accepted: the limit doubles
    EXPECT_EQ(b.misses, 0);
    EXPECT_EQ(b.limit, 2);
    EXPECT_TRUE(b.ready());
    b.verified(2, 2);
    EXPECT_EQ(b.limit, 4);
    b.verified(2, 4);  // some refused: accepted + 1
    EXPECT_EQ(b.limit, 3);
    EXPECT_TRUE(b.ready());
}

}  // namespace
}  // namespace pagoda::engine
