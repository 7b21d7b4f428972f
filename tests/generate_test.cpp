// Generation through the engine and the paged KV cache against the reference
// continuation of the bundled model, for several block sizes, and generation limits.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "model/model.h"
#include "testdata/stories260k_golden.h"

namespace pagoda::engine {
namespace {

struct Out {
    std::vector<int32_t> ids;
    std::string text;
};

Out run(Engine& e, Request r) {
    auto s = e.submit(std::move(r));
    EXPECT_TRUE(s.ok()) << s.error().message;
    Out o;
    Event ev;
    while ((*s)->next(ev)) {
        o.ids.insert(o.ids.end(), ev.token_ids.begin(), ev.token_ids.end());
        o.text += ev.text;
    }
    return o;
}

TEST(Generate, Stories260KGreedyMatchesReferenceContinuation) {
    auto m = model::Model::load(testdata::kStoriesPath);
    ASSERT_TRUE(m.ok()) << m.error().message;
    const auto prompt = (*m)->tokenizer().encode("Once upon a time");
    ASSERT_EQ(prompt, (std::vector<int32_t>{1, 403, 407, 261, 378}));
    for (int bs : {8, 16, 128}) {
        EngineConfig c;
        c.kv = {.block_size = bs, .num_blocks = 64};
        auto e = Engine::create(**m, c);
        ASSERT_TRUE(e.ok()) << e.error().message;
        Request r;
        r.prompt_ids = prompt;
        r.sampling.temperature = 0.0f;
        r.sampling.max_tokens = 32;
        const Out o = run(**e, r);
        EXPECT_EQ(o.ids, testdata::kStoriesGoldenIds) << "block size " << bs;
        EXPECT_EQ(o.text, testdata::kStoriesGoldenText) << "block size " << bs;
        EXPECT_EQ((*m)->tokenizer().decode(o.ids), testdata::kStoriesGoldenText)
            << "block size " << bs;
    }
}

TEST(Generate, PromptLongerThanContextIsAnError) {
    auto m = model::Model::load(testdata::kStoriesPath);
    ASSERT_TRUE(m.ok());
    EngineConfig c;
    c.kv = {.block_size = 16, .num_blocks = 256};
    auto e = Engine::create(**m, c);
    ASSERT_TRUE(e.ok());
    Request r;
    r.prompt_ids.assign(2048, 300);
    auto s = (*e)->submit(r);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("maximum context length is 2048 tokens"), std::string::npos)
        << s.error().message;
}

}  // namespace
}  // namespace pagoda::engine
