// Generation through the paged KV cache against the reference continuation, and
// generation limits.
#include <gtest/gtest.h>

#include "engine/generator.h"
#include "model/model.h"

namespace pagoda::model {
namespace {

const std::string kStories = PAGODA_SOURCE_DIR "/models/stories260K.gguf";

// ../shared/data/models/REFERENCE.md: llama.cpp and an independent NumPy port agree.
const std::vector<int32_t> kGoldenIds = {432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426,
                                         338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322,
                                         265, 282, 295, 433, 426, 385, 328, 432, 358, 394};
const char* kGoldenText =
    ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw";

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
