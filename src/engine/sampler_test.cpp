// Sampler: each parameter's effect on a fixed logits row, seeds, logprobs and validation.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

namespace pagoda::engine {
namespace {

// softmax: token 1 0.402, token 4 0.363, token 2 0.148, token 0 0.054, token 3 0.033.
const std::vector<float> kLogits = {1.0f, 3.0f, 2.0f, 0.5f, 2.9f};

SamplingParams params(float temperature, uint64_t seed = 7) {
    SamplingParams p;
    p.temperature = temperature;
    p.seed = seed;
    return p;
}

std::map<int32_t, int> draws(const SamplingParams& p, int n) {
    Sampler s(p);
    std::map<int32_t, int> counts;
    for (int i = 0; i < n; ++i) ++counts[s.sample(kLogits)];
    return counts;
}

std::set<int32_t> support(const std::map<int32_t, int>& counts) {
    std::set<int32_t> out;
    for (const auto& [t, c] : counts) out.insert(t);
    return out;
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
    Sampler s(params(0.0f));
    EXPECT_EQ(s.sample(kLogits), 1);
    EXPECT_EQ(argmax(std::vector<float>{2.0f, 5.0f, 5.0f}), 1);
}

TEST(Sampler, TemperatureOneFollowsTheSoftmax) {
    const int n = 20000;
    const auto counts = draws(params(1.0f), n);
    double z = 0;
    for (float l : kLogits) z += std::exp(double(l));
    for (int32_t t = 0; t < 5; ++t) {
        const double want = std::exp(double(kLogits[size_t(t)])) / z;
        const double got = double(counts.count(t) ? counts.at(t) : 0) / n;
        EXPECT_NEAR(got, want, 0.02) << "token " << t;
    }
}

TEST(Sampler, LowTemperatureSharpensHighFlattens) {
    const auto cold = draws(params(0.1f), 2000);
    const auto hot = draws(params(10.0f), 2000);
    EXPECT_GT(cold.at(1), 1200);  // ~73%: exp(30) vs exp(29)
    EXPECT_LT(hot.at(1), 700);    // ~24%: nearly uniform
    EXPECT_EQ(support(hot).size(), 5u);
}

TEST(Sampler, TopKKeepsTheKBest) {
    SamplingParams p = params(1.0f);
    p.top_k = 1;
    EXPECT_EQ(support(draws(p, 300)), (std::set<int32_t>{1}));
    p.top_k = 2;
    EXPECT_EQ(support(draws(p, 300)), (std::set<int32_t>{1, 4}));
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
    SamplingParams p = params(1.0f);
    p.top_p = 0.3f;  // token 1 alone holds 0.40
    EXPECT_EQ(support(draws(p, 300)), (std::set<int32_t>{1}));
    p.top_p = 0.6f;  // 0.40 + 0.36
    EXPECT_EQ(support(draws(p, 300)), (std::set<int32_t>{1, 4}));
    p.top_p = 0.85f;  // + 0.15
    EXPECT_EQ(support(draws(p, 600)), (std::set<int32_t>{1, 2, 4}));
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheTop) {
    SamplingParams p = params(1.0f);
    p.min_p = 0.5f;  // floor 0.20: tokens 1 and 4
    EXPECT_EQ(support(draws(p, 300)), (std::set<int32_t>{1, 4}));
    p.min_p = 0.95f;  // floor 0.38: token 1
    EXPECT_EQ(support(draws(p, 300)), (std::set<int32_t>{1}));
}

TEST(Sampler, SameSeedSameDrawsIndexAndSeedChangeThem) {
    auto run = [](uint64_t seed, int index) {
        Sampler s(params(1.0f, seed), index);
        std::vector<int32_t> out;
        for (int i = 0; i < 64; ++i) out.push_back(s.sample(kLogits));
        return out;
    };
    EXPECT_EQ(run(42, 0), run(42, 0));
    EXPECT_NE(run(42, 0), run(42, 1));
    EXPECT_NE(run(42, 0), run(43, 0));
    EXPECT_EQ(run(42, 1), run(43, 0)) << "sample i of seed s draws as seed s + i";
}

TEST(Sampler, LogitBiasShiftsTokens) {
    SamplingParams p = params(0.0f);
    p.logit_bias = {{3, 100.0f}};
    EXPECT_EQ(Sampler(p).sample(kLogits, {}, {}), 3);
    p.logit_bias = {{1, -100.0f}};
    EXPECT_EQ(Sampler(p).sample(kLogits, {}, {}), 4);
}

TEST(Sampler, MinTokensMasksEndTokensUntilReached) {
    SamplingParams p = params(0.0f);
    p.min_tokens = 2;
    Sampler s(p);
    const std::vector<int32_t> end = {1};
    EXPECT_EQ(s.sample(kLogits, {}, end), 4);
    s.accept(4);
    EXPECT_EQ(s.sample(kLogits, {}, end), 4);
    s.accept(4);
    EXPECT_EQ(s.sample(kLogits, {}, end), 1);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
    SamplingParams p = params(0.0f);
    p.repetition_penalty = 2.0f;
    const std::vector<int32_t> prompt = {1};
    EXPECT_EQ(Sampler(p).sample(kLogits, prompt, {}), 4);  // 3 / 2 = 1.5 < 2.9
    // Negative logits get more negative: -0.1 * 2 = -0.2 < -0.15.
    const std::vector<float> neg = {-0.1f, -0.15f};
    EXPECT_EQ(Sampler(params(0.0f)).sample(neg, {}, {}), 0);
    EXPECT_EQ(Sampler(p).sample(neg, std::vector<int32_t>{0}, {}), 1);
    // Output tokens count too.
    Sampler s(p);
    s.accept(1);
    EXPECT_EQ(s.sample(kLogits, {}, {}), 4);
}

TEST(Sampler, PresencePenaltyOnceFrequencyPenaltyPerOccurrence) {
    SamplingParams p = params(0.0f);
    p.presence_penalty = 0.2f;  // 3 - 0.2 = 2.8 < 2.9
    Sampler a(p);
    EXPECT_EQ(a.sample(kLogits, {}, {}), 1);
    a.accept(1);
    EXPECT_EQ(a.sample(kLogits, {}, {}), 4);
    p = params(0.0f);
    p.frequency_penalty = 0.06f;  // once: 2.94 > 2.9; twice: 2.88 < 2.9
    Sampler f(p);
    f.accept(1);
    EXPECT_EQ(f.sample(kLogits, {}, {}), 1);
    f.accept(1);
    EXPECT_EQ(f.sample(kLogits, {}, {}), 4);
}

TEST(Sampler, LogprobsAreLogSoftmaxWithTheTopK) {
    double z = 0;
    for (float l : kLogits) z += std::exp(double(l));
    const TokenLogprob lp = compute_logprobs(kLogits, 2, 3);
    EXPECT_EQ(lp.token, 2);
    EXPECT_NEAR(lp.logprob, 2.0 - std::log(z), 1e-5);
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_EQ(lp.top[0].first, 1);
    EXPECT_EQ(lp.top[1].first, 4);
    EXPECT_EQ(lp.top[2].first, 2);
    EXPECT_NEAR(lp.top[1].second, 2.9 - std::log(z), 1e-5);
    EXPECT_TRUE(compute_logprobs(kLogits, 0, 0).top.empty());
}

TEST(SamplingParams, ValidateNamesTheFieldAndTheRange) {
    auto message = [](auto edit) {
        SamplingParams p;
        edit(p);
        const Status st = p.validate(5);
        return st.ok() ? std::string("ok") : st.error().message;
    };
    EXPECT_EQ(message([](SamplingParams&) {}), "ok");
    EXPECT_EQ(message([](SamplingParams& p) { p.temperature = -1; }),
              "temperature must be in [0, 100], got -1");
    EXPECT_EQ(message([](SamplingParams& p) { p.top_p = 0; }), "top_p must be in (0, 1], got 0");
    EXPECT_EQ(message([](SamplingParams& p) {
                  p.logit_bias = {{5, 1.0f}};
              }),
              "logit_bias token id 5 is out of range [0, 5)");
    EXPECT_EQ(message([](SamplingParams& p) { p.min_tokens = 20; }),
              "min_tokens must be in [0, max_tokens=16], got 20");
    EXPECT_EQ(message([](SamplingParams& p) { p.n = 0; }), "n must be in [1, 64], got 0");
    EXPECT_EQ(message([](SamplingParams& p) { p.stop = {""}; }), "stop strings must not be empty");
}

// greedy(): the row's own argmax is the answer (the backend may pick it) only at temperature
// 0 with nothing that reshapes the row: no penalty, no logit bias, and no end token masked
// before min_tokens (from the min_tokens-th accepted token on, the row is the row again).
TEST(Sampler, GreedyOnlyWhenTheRowIsTakenAsItIs) {
    const std::vector<int32_t> ends = {2};
    auto greedy = [&](void (*edit)(SamplingParams&)) {
        SamplingParams p;
        p.temperature = 0;
        edit(p);
        return Sampler(p).greedy(ends);
    };
    EXPECT_TRUE(greedy([](SamplingParams&) {}));
    EXPECT_FALSE(greedy([](SamplingParams& p) { p.temperature = 0.5f; }));
    EXPECT_FALSE(greedy([](SamplingParams& p) { p.logit_bias = {{1, 5.0f}}; }));
    EXPECT_FALSE(greedy([](SamplingParams& p) { p.repetition_penalty = 1.2f; }));
    EXPECT_FALSE(greedy([](SamplingParams& p) { p.presence_penalty = 0.5f; }));
    EXPECT_FALSE(greedy([](SamplingParams& p) { p.frequency_penalty = 0.5f; }));
    SamplingParams p;
    p.temperature = 0;
    p.min_tokens = 2;
    Sampler s(p);
    EXPECT_FALSE(s.greedy(ends));
    EXPECT_TRUE(s.greedy({}));  // no end token to mask
    s.accept(7);
    EXPECT_FALSE(s.greedy(ends));
    s.accept(7);
    EXPECT_TRUE(s.greedy(ends));
}

}  // namespace
}  // namespace pagoda::engine
