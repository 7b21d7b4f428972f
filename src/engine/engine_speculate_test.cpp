// Speculative decoding through the engine: greedy outputs with drafts equal those without,
// alone and batched, at any block size and token budget, through preemption; the counters
// show drafts were verified and accepted (so the equality was tested on real drafts).
#include <gtest/gtest.h>

#include <thread>

#include "engine/engine_test_util.h"

namespace pagoda::engine {
namespace {

using namespace test_util;

EngineConfig spec_config(int block_size, int budget, int k, int64_t num_blocks = 512) {
    EngineConfig c = config(block_size, budget, num_blocks);
    c.spec = {.num_speculative_tokens = k, .prompt_lookup_max = 4, .prompt_lookup_min = 1};
    return c;
}

// The golden prompt, story prompts that repeat themselves, and 16 random ones (half of them
// a random stretch said twice, so lookup finds matches from the start).
std::vector<Request> test_requests(model::Model& m) {
    const auto& tok = m.tokenizer();
    std::vector<Request> reqs;
    reqs.push_back(greedy(tok.encode("Once upon a time"), 32));
    reqs.push_back(greedy(tok.encode("Lily and Ben went to the park. Lily and Ben went to the "
                                     "park. Lily and Ben"),
                          64));
    reqs.push_back(greedy(tok.encode("The cat sat on the mat. The dog sat on the"), 48));
    Request eos = greedy(tok.encode("Once upon a time"), 60);
    eos.sampling.ignore_eos = false;  // an end token inside accepted drafts ends it there
    eos.sampling.stop_token_ids = {testdata::kStoriesGoldenIds[12]};
    reqs.push_back(eos);
    Request stop = greedy(tok.encode("Tom had a red ball. Tom had a"), 80);
    stop.sampling.stop = {"ball. He"};
    reqs.push_back(stop);
    auto prompts = random_prompts(m, 16, 3, 90, 21);
    for (size_t i = 0; i < prompts.size(); ++i) {
        auto& p = prompts[i];
        if (i % 2 == 0) p.insert(p.end(), p.begin() + 1, p.end());
        reqs.push_back(greedy(p, 24 + int(i % 4) * 16));
    }
    return reqs;
}

std::vector<Output> run_all(model::Model& m, const EngineConfig& cfg,
                            const std::vector<Request>& reqs, bool together,
                            std::shared_ptr<const EngineStats>* stats = nullptr) {
    std::vector<Output> out;
    auto e = Engine::create(m, cfg);
    PAGODA_CHECK(e.ok()) << e.error().message;
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const Request& r : reqs) {
        auto s = (*e)->submit(r);
        PAGODA_CHECK(s.ok()) << s.error().message;
        if (together) {
            streams.push_back(*s);
        } else {
            out.push_back(collect(**s)[0]);
        }
    }
    for (auto& s : streams) out.push_back(collect(*s)[0]);
    if (stats != nullptr) *stats = (*e)->stats();
    return out;
}

struct SpecCase {
    const char* model;
    int block_size;
    int budget;
    int k;
    bool together;
    kvcache::KvDtype dtype = kvcache::KvDtype::kF32;
};

class SpeculationEquality : public ::testing::TestWithParam<SpecCase> {};

TEST_P(SpeculationEquality, GreedyOutputsEqualPlainDecoding) {
    const SpecCase c = GetParam();
    model::Model& m = model_named(c.model);
    const auto reqs = test_requests(m);
    EngineConfig plain_cfg = config(c.block_size, c.budget);
    EngineConfig spec_cfg = spec_config(c.block_size, c.budget, c.k);
    plain_cfg.kv.dtype = spec_cfg.kv.dtype = c.dtype;
    const auto plain = run_all(m, plain_cfg, reqs, false);
    std::shared_ptr<const EngineStats> st;
    const auto spec = run_all(m, spec_cfg, reqs, c.together, &st);
    ASSERT_EQ(plain.size(), spec.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
        EXPECT_EQ(spec[i].ids, plain[i].ids) << "request " << i;
        EXPECT_EQ(spec[i].text, plain[i].text) << "request " << i;
        EXPECT_EQ(spec[i].finish, plain[i].finish) << "request " << i;
        EXPECT_EQ(spec[i].usage.completion_tokens, plain[i].usage.completion_tokens);
    }
    if (&m == &stories()) {
        EXPECT_EQ(spec[0].ids, testdata::kStoriesGoldenIds);
        EXPECT_EQ(spec[3].finish, FinishReason::kStop);  // the stop token
        EXPECT_LE(spec[3].ids.size(), 13u);
        EXPECT_EQ(spec[4].finish, FinishReason::kStop);  // the stop string
        EXPECT_EQ(spec[4].stop_reason, "ball. He");
    }
    // Drafts were verified, some accepted and some refused.
    EXPECT_GT(st->spec_drafts, 20);
    EXPECT_GT(st->spec_accepted_tokens, 20);
    EXPECT_LT(st->spec_accepted_tokens, st->spec_draft_tokens);
    EXPECT_EQ(st->blocks.used, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Engine, SpeculationEquality,
    ::testing::Values(
        SpecCase{"stories260k", 16, 2048, 4, false}, SpecCase{"stories260k", 48, 2048, 8, true},
        SpecCase{"stories260k", 16, 3, 4, true},  // budget cuts drafts short
        SpecCase{"tiny-gqa", 16, 2048, 4, false}, SpecCase{"tiny-gqa", 32, 64, 6, true},
        SpecCase{"tiny-gqa-hd32", 16, 2048, 4, true, kvcache::KvDtype::kQ8_0},
        SpecCase{"tiny-gqa-hd32", 32, 2048, 4, true, kvcache::KvDtype::kQ4_0},
        // Mixtures of experts: a verify's rows route as decode's one row.
        SpecCase{"tiny-mixtral", 16, 2048, 4, true}, SpecCase{"tiny-qwen3moe", 16, 2048, 6, false}),
    [](const auto& info) {
        const SpecCase& c = info.param;
        std::string n = std::string(c.model) + "_bs" + std::to_string(c.block_size) + "_budget" +
                        std::to_string(c.budget) + "_k" + std::to_string(c.k) +
                        (c.together ? "_batched" : "_alone") + "_" +
                        kvcache::kv_dtype_name(c.dtype);
        std::erase(n, '-');
        return n;
    });

TEST(Speculation, PreemptionKeepsOutputs) {
    model::Model& m = stories();
    const auto reqs = test_requests(m);
    const auto plain = run_all(m, config(16, 2048), reqs, false);
    std::shared_ptr<const EngineStats> st;
    // 24 blocks of 16 for 21 requests: sequences are preempted and recomputed, drafts dropped.
    const auto spec = run_all(m, spec_config(16, 2048, 4, 24), reqs, true, &st);
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(spec[i].ids, plain[i].ids) << i;
    EXPECT_GT(st->preemptions, 0);
    EXPECT_GT(st->spec_accepted_tokens, 0);
    EXPECT_EQ(st->blocks.used, 0);
}

TEST(Speculation, SampledRequestsDoNotSpeculate) {
    model::Model& m = stories();
    Request r = greedy(m.tokenizer().encode("Lily and Ben. Lily and Ben. Lily and"), 40);
    r.sampling.temperature = 0.8f;
    r.sampling.seed = 5;
    std::shared_ptr<const EngineStats> st;
    const auto spec = run_all(m, spec_config(16, 2048, 4), {r}, false, &st);
    EXPECT_EQ(st->spec_drafts, 0);
    EXPECT_EQ(spec[0].ids, run_all(m, config(16, 2048), {r}, false)[0].ids);
}

}  // namespace
}  // namespace pagoda::engine
