// Generation through the paged KV cache against the reference continuation, and
// generation limits.
#include <gtest/gtest.h>

#include "engine/generator.h"
#include "model/model.h"

#include "testdata/stories260k_golden.h"

namespace pagoda::model {
namespace {

const std::string& kStories = testdata::kStoriesPath;
const std::vector<int32_t>& kGoldenIds = testdata::kStoriesGoldenIds;
const char* const kGoldenText = testdata::kStoriesGoldenText;

TEST(Model, Stories260KGreedyMatchesReferenceContinuation) {
    auto m = Model::load(kStories);
    ASSERT_TRUE(m.ok()) << m.error().message;
    const auto prompt = (*m)->tokenizer().encode("Once upon a time");
    ASSERT_EQ(prompt, (std::vector<int32_t>{1, 403, 407, 261, 378}));
    for (int bs : {8, 16, 128}) {
        auto gen = engine::Generator::create(**m, {.block_size = bs, .num_blocks = 64});
        ASSERT_TRUE(gen.ok()) << gen.error().message;
        engine::GenerateParams p;
        p.max_new_tokens = 32;
        p.sampling.temperature = 0.0f;
        auto r = gen->generate(prompt, p);
        ASSERT_TRUE(r.ok()) << r.error().message;
        EXPECT_EQ(r->output_ids, kGoldenIds) << "block size " << bs;
        EXPECT_EQ((*m)->tokenizer().decode(r->output_ids), std::string(kGoldenText).substr(0)) << "block size " << bs;
    }
}

TEST(Model, PromptLongerThanContextIsAnError) {
    auto m = Model::load(kStories);
    ASSERT_TRUE(m.ok());
    auto gen = engine::Generator::create(**m, {.block_size = 16, .num_blocks = 256});
    ASSERT_TRUE(gen.ok());
    std::vector<int32_t> prompt(2040, 300);
    engine::GenerateParams p;
    p.max_new_tokens = 32;
    auto r = gen->generate(prompt, p);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("exceeds the model's context length of 2048"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::model
