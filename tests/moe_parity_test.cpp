// Mixtures of experts against llama.cpp (scripts/moe-parity.sh recorded llama-server's
// greedy tokens in testdata/moe_parity.h) on random-weight files written again here from
// the same shape, type and seed: Mixtral (llama with experts), Qwen3-MoE (f32 and Q8_0),
// OLMoE and Granite MoE. Teacher forced: one pass over the prompt and llama.cpp's tokens;
// at every position Pagoda's greedy token (ids below kMoeBannedBelow masked, as the
// script banned them) is llama.cpp's, or the two are tied within kTie in Pagoda's
// logits. Then the same rows as one mixed batch, at two block sizes: the same tokens
// (batch and block-size invariance).
#include "testdata/moe_parity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kvcache/kv_pool.h"
#include "model/model.h"
#include "model/test_model.h"
#include "testdata/stories260k_golden.h"

namespace pagoda::model {
namespace {

constexpr float kTie = 0.05f;

std::unique_ptr<Model> load(const testdata::MoeParity& f) {
    const std::string path = ::testing::TempDir() + "/pagoda_moe_" + f.shape + "_" + f.dtype + "_" +
                             std::to_string(f.seed) + ".gguf";
    auto shape = find_shape(f.shape);
    EXPECT_TRUE(shape.ok());
    auto type = formats::parse_tensor_type(f.dtype);
    EXPECT_TRUE(type.has_value()) << f.dtype;
    const Status st = write_test_model({.shape = *shape,
                                        .dtype = *type,
                                        .seed = f.seed,
                                        .vocab_path = testdata::kStoriesPath,
                                        .output_path = path});
    EXPECT_TRUE(st.ok()) << st.error().message;
    auto m = Model::load(path);
    EXPECT_TRUE(m.ok()) << m.error().message;
    return m.ok() ? std::move(*m) : nullptr;
}

// The argmax over allowed ids of one row of logits.
int32_t greedy(const float* z, int vocab) {
    int32_t best = testdata::kMoeBannedBelow;
    for (int32_t i = best; i < vocab; ++i) {
        if (z[i] > z[best]) best = i;
    }
    return best;
}

// Logits of every row from the prompt's last token on, for all sequences in one batch
// (or each alone), on a fresh pool of `block_size`.
std::vector<std::vector<float>> teacher_forced(Model& m, const testdata::MoeParity& f,
                                               int block_size, bool one_batch) {
    const ModelConfig& c = m.config();
    auto pool = kvcache::KvPool::create({.block_size = block_size, .num_blocks = 64}, c.num_layers,
                                        c.num_kv_heads, c.head_dim);
    EXPECT_TRUE(pool.ok());
    const kvcache::KvView view(*pool);
    int32_t next_block = 0;
    std::vector<std::vector<float>> out(f.prompts.size());
    ForwardBatch b;
    std::vector<size_t> firsts;
    std::vector<kvcache::BlockTable> tables(f.prompts.size());  // the spans point into these
    auto run = [&] {
        std::vector<float> logits;
        const Status st = m.forward(b, view, logits);
        EXPECT_TRUE(st.ok()) << st.error().message;
        return logits;
    };
    for (size_t i = 0; i < f.prompts.size(); ++i) {
        std::vector<int32_t> ids = f.prompts[i];
        ids.insert(ids.end(), f.llama_cpp[i].begin(), f.llama_cpp[i].end() - 1);
        const int n = int(ids.size()), start = int(b.token_ids.size());
        kvcache::BlockTable& table = tables[i];
        for (int p = 0; p < n; p += block_size) table.push_back(next_block++);
        b.token_ids.insert(b.token_ids.end(), ids.begin(), ids.end());
        b.seqs.push_back({start, n, 0, table});
        firsts.push_back(b.logits_rows.size());
        for (int r = int(f.prompts[i].size()) - 1; r < n; ++r) b.logits_rows.push_back(start + r);
        if (!one_batch) {
            out[i] = run();
            b = {};
            firsts.clear();
        }
    }
    if (one_batch) {
        const std::vector<float> all = run();
        const size_t V = size_t(c.vocab_size);
        for (size_t i = 0; i < f.prompts.size(); ++i) {
            const size_t rows = f.llama_cpp[i].size();
            out[i].assign(all.begin() + ptrdiff_t(firsts[i] * V),
                          all.begin() + ptrdiff_t((firsts[i] + rows) * V));
        }
    }
    return out;
}

TEST(MoeParity, GreedyMatchesLlamaCppTeacherForced) {
    for (const auto& f : testdata::kMoeParity) {
        SCOPED_TRACE(f.shape + " " + f.dtype);
        std::unique_ptr<Model> m = load(f);
        ASSERT_TRUE(m);
        ASSERT_TRUE(m->config().moe());
        const int V = m->config().vocab_size;
        const auto alone = teacher_forced(*m, f, 16, false);
        int equal = 0, ties = 0, total = 0;
        for (size_t i = 0; i < f.prompts.size(); ++i) {
            for (size_t k = 0; k < f.llama_cpp[i].size(); ++k, ++total) {
                const float* z = alone[i].data() + k * size_t(V);
                const int32_t ours = greedy(z, V), theirs = f.llama_cpp[i][k];
                if (ours == theirs) {
                    ++equal;
                    continue;
                }
                ++ties;
                EXPECT_LT(z[ours] - z[theirs], kTie)
                    << "prompt " << i << " position " << k << ": Pagoda " << ours << " (" << z[ours]
                    << "), llama.cpp " << theirs << " (" << z[theirs] << ")";
            }
        }
        std::printf("%s %s: %d of %d teacher-forced tokens equal to llama.cpp's, %d ties\n",
                    f.shape.c_str(), f.dtype.c_str(), equal, total, ties);
        // One mixed batch, two block sizes: every row's greedy token as alone.
        for (int bs : {16, 48}) {
            const auto batched = teacher_forced(*m, f, bs, true);
            for (size_t i = 0; i < f.prompts.size(); ++i) {
                for (size_t k = 0; k < f.llama_cpp[i].size(); ++k) {
                    EXPECT_EQ(greedy(batched[i].data() + k * size_t(V), V),
                              greedy(alone[i].data() + k * size_t(V), V))
                        << "block size " << bs << " prompt " << i << " position " << k;
                }
            }
        }
    }
}

}  // namespace
}  // namespace pagoda::model
