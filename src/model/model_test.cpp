#include "model/model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "formats/gguf_writer.h"
#include "model/reference.h"
#include "model/test_model.h"
#include "testdata/stories260k_golden.h"

namespace pagoda::model {
namespace {

const std::string& kStories = testdata::kStoriesPath;
const std::vector<int32_t>& kGoldenIds = testdata::kStoriesGoldenIds;

TEST(Model, ReferenceForwardAgreesOnStories260K) {
    auto m = Model::load(kStories);
    ASSERT_TRUE(m.ok()) << m.error().message;
    std::vector<int32_t> ids = {1, 403, 407, 261, 378};
    ids.insert(ids.end(), kGoldenIds.begin(), kGoldenIds.end() - 1);
    const auto logits = reference_forward(**m, ids);
    for (size_t t = 4; t < ids.size(); ++t) {
        const auto& row = logits[t];
        const int32_t best = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
        EXPECT_EQ(best, kGoldenIds[t - 4]) << "position " << t;
    }
}

std::string write_model(const std::string& shape, formats::TensorType type, uint64_t seed) {
    const std::string path =
        ::testing::TempDir() + "/pagoda_" + shape + "_" + std::to_string(seed) + ".gguf";
    auto s = find_shape(shape);
    EXPECT_TRUE(s.ok());
    auto st = write_test_model(
        {.shape = *s, .dtype = type, .seed = seed, .vocab_path = kStories, .output_path = path});
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
    return path;
}

double rel_err(const float* a, const std::vector<float>& b) {
    double num = 0, den = 1e-30;
    for (size_t i = 0; i < b.size(); ++i) {
        num = std::max(num, double(std::fabs(a[i] - b[i])));
        den = std::max(den, double(std::fabs(b[i])));
    }
    return num / den;
}

// A mixed batch: three prefills of different lengths and three decodes (whose earlier
// tokens were written by previous forward calls), all paged through shuffled blocks,
// checked row by row against the contiguous scalar reference.
void check_paged_matches_reference(const std::string& shape, int block_size) {
    const std::string path = write_model(shape, formats::TensorType::kF32, 42);
    auto m = Model::load(path);
    ASSERT_TRUE(m.ok()) << m.error().message;
    Model& model = **m;
    auto pool = kvcache::KvPool::create({.block_size = block_size, .num_blocks = 64},
                                        model.config().num_layers, model.config().num_kv_heads,
                                        model.config().head_dim);
    ASSERT_TRUE(pool.ok()) << pool.error().message;
    const kvcache::KvView view(*pool);
    std::vector<int32_t> free_blocks(64);
    for (int i = 0; i < 64; ++i) free_blocks[size_t(i)] = i;
    std::shuffle(free_blocks.begin(), free_blocks.end(), std::mt19937(block_size));

    std::mt19937 rng(7);
    const std::vector<int> prefill_lens = {3, 17, 41}, decode_ctx = {1, 20, 70};
    struct Seq {
        std::vector<int32_t> ids;
        kvcache::BlockTable table;
    };
    std::vector<Seq> seqs(6);
    auto grow = [&](Seq& s, size_t n) {
        while (s.table.size() * size_t(block_size) < n) {
            s.table.push_back(free_blocks.back());
            free_blocks.pop_back();
        }
    };
    for (size_t i = 0; i < 6; ++i) {
        const int len = i < 3 ? prefill_lens[i] : decode_ctx[i - 3] + 1;
        for (int t = 0; t < len; ++t) seqs[i].ids.push_back(int32_t(rng() % 512));
        grow(seqs[i], seqs[i].ids.size());
    }
    std::vector<float> logits;
    // Earlier steps: the decode sequences' contexts, as one prefill each.
    for (size_t i = 3; i < 6; ++i) {
        ForwardBatch b;
        const int ctx = decode_ctx[i - 3];
        b.token_ids.assign(seqs[i].ids.begin(), seqs[i].ids.begin() + ctx);
        b.seqs = {{0, ctx, 0, seqs[i].table}};
        ASSERT_TRUE(model.forward(b, view, logits).ok());
    }
    // The mixed step.
    ForwardBatch b;
    for (size_t i = 0; i < 6; ++i) {
        const int start = int(b.token_ids.size());
        const int n = i < 3 ? int(seqs[i].ids.size()) : 1;
        const int pos0 = i < 3 ? 0 : decode_ctx[i - 3];
        b.token_ids.insert(b.token_ids.end(), seqs[i].ids.begin() + pos0, seqs[i].ids.end());
        b.seqs.push_back({start, n, pos0, seqs[i].table});
        for (int r = 0; r < n; ++r) b.logits_rows.push_back(start + r);
    }
    auto st = model.forward(b, view, logits);
    ASSERT_TRUE(st.ok()) << st.error().message;
    const size_t V = size_t(model.config().vocab_size);
    size_t row = 0;
    for (size_t i = 0; i < 6; ++i) {
        const auto want = reference_forward(model, seqs[i].ids);
        const size_t pos0 = i < 3 ? 0 : size_t(decode_ctx[i - 3]);
        for (size_t p = pos0; p < seqs[i].ids.size(); ++p, ++row) {
            EXPECT_LE(rel_err(logits.data() + row * V, want[p]), 5e-6)
                << shape << " block size " << block_size << " seq " << i << " pos " << p;
        }
    }
}

class PagedVsReference : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(PagedVsReference, LogitsMatch) {
    check_paged_matches_reference(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, PagedVsReference,
                         ::testing::Combine(::testing::Values("tiny-gqa"),
                                            ::testing::Values(8, 16, 32, 48, 64, 128)));
INSTANTIATE_TEST_SUITE_P(Architectures, PagedVsReference,
                         ::testing::Combine(::testing::Values("tiny-qwen2", "tiny-qwen3"),
                                            ::testing::Values(16)));
// Mixtures of experts: the batched experts (rows grouped by expert, one matmul each) against
// the reference's expert-by-expert sum per token, in a mixed prefill/decode batch.
INSTANTIATE_TEST_SUITE_P(Experts, PagedVsReference,
                         ::testing::Combine(::testing::Values("tiny-mixtral", "tiny-qwen3moe",
                                                              "tiny-olmoe", "tiny-granitemoe"),
                                            ::testing::Values(16, 48)));

// A mixture's router gives a row the same logits alone and in batches of every size (the
// packed F32 kernel and direct dot products round differently: one path for every T).
TEST(Model, RouterLogitsOfARowDoNotDependOnTheBatch) {
    const std::string path = write_model("tiny-mixtral", formats::TensorType::kF32, 5);
    auto m = Model::load(path);
    ASSERT_TRUE(m.ok()) << m.error().message;
    const Linear& router = (*m)->weights().layers[0].router;
    const int D = (*m)->config().dim, E = (*m)->config().num_experts;
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> h(size_t(64) * size_t(D));
    for (float& v : h) v = nd(rng);
    std::vector<float> alone(static_cast<size_t>(E)), batch(size_t(64) * size_t(E));
    for (int T : {2, 4, 5, 8, 17, 64}) {
        router_logits(router, h.data(), T, D, batch.data());
        for (int t = 0; t < T; t += std::max(1, T / 4)) {
            router_logits(router, h.data() + size_t(t) * size_t(D), 1, D, alone.data());
            for (int e = 0; e < E; ++e)
                ASSERT_EQ(alone[size_t(e)], batch[size_t(t) * size_t(E) + size_t(e)])
                    << "row " << t << " of " << T << ", expert " << e;
        }
    }
}

TEST(Model, QuantizedModelsStayCloseToReference) {
    for (auto type :
         {formats::TensorType::kBF16, formats::TensorType::kQ8_0, formats::TensorType::kQ4_0}) {
        const std::string path = write_model("tiny-gqa", type, 3);
        auto m = Model::load(path);
        ASSERT_TRUE(m.ok()) << m.error().message;
        auto pool = kvcache::KvPool::create({.block_size = 16, .num_blocks = 8}, 2, 2, 16);
        ASSERT_TRUE(pool.ok());
        const std::vector<int32_t> ids = {1, 5, 9, 200, 300, 17, 44, 81};
        kvcache::BlockTable table = {3, 5};
        ForwardBatch b{ids, {{0, 8, 0, table}}, {7}, {}, {}};
        std::vector<float> logits;
        ASSERT_TRUE((*m)->forward(b, kvcache::KvView(*pool), logits).ok());
        const auto want = reference_forward(**m, ids);
        // The fast path rounds activations (bf16, or 8-bit per 32-block for Q8_0/Q4_0).
        EXPECT_LE(rel_err(logits.data(), want[7]), 5e-2) << formats::tensor_type_name(type);
    }
}

// A pass with an interrupt that fires stops before the layer it is asked at (kConflict);
// the pass after it, on the same scratch and blocks, is the uninterrupted result.
TEST(Model, InterruptStopsThePassBetweenLayers) {
    const std::string path = write_model("tiny-gqa", formats::TensorType::kF32, 3);
    auto m = Model::load(path);
    ASSERT_TRUE(m.ok()) << m.error().message;
    auto pool =
        kvcache::KvPool::create({.block_size = 16, .num_blocks = 8}, (*m)->config().num_layers,
                                (*m)->config().num_kv_heads, (*m)->config().head_dim);
    ASSERT_TRUE(pool.ok());
    const std::vector<int32_t> ids = {1, 5, 9, 200};
    kvcache::BlockTable table = {2};
    ForwardBatch b{ids, {{0, 4, 0, table}}, {3}, {}, {}};
    std::vector<float> want, got;
    ASSERT_TRUE((*m)->forward(b, kvcache::KvView(*pool), want).ok());
    int asked = 0;
    b.interrupt = [&] { return ++asked == 2; };
    const Status st = (*m)->forward(b, kvcache::KvView(*pool), got);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::kConflict);
    EXPECT_NE(st.error().message.find("before layer 1"), std::string::npos) << st.error().message;
    EXPECT_EQ(asked, 2);
    b.interrupt = [&] { return false; };
    ASSERT_TRUE((*m)->forward(b, kvcache::KvView(*pool), got).ok());
    EXPECT_EQ(got, want);
}

TEST(Model, RejectsUnknownArchitectureAndTensorType) {
    formats::GgufWriter w;
    w.add_string("general.architecture", "gpt-j");
    const std::string p1 = ::testing::TempDir() + "/pagoda_badarch.gguf";
    ASSERT_TRUE(w.write(p1).ok());
    auto m = Model::load(p1);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.error().message.find("architecture 'gpt-j' is not supported"), std::string::npos)
        << m.error().message;

    // A Q5_0 tensor: known to GGUF, not computed yet.
    const std::string good = write_model("tiny-gqa", formats::TensorType::kF32, 5);
    auto f = MappedFile::open(good);
    ASSERT_TRUE(f.ok());
    auto g = formats::GgufFile::parse(f->bytes(), good);
    ASSERT_TRUE(g.ok());
    formats::GgufWriter w2;
    for (const auto& [k, v] : g->metadata()) w2.add(k, v);
    for (const auto& t : g->tensors()) {
        if (t.name == "blk.0.ffn_up.weight") {
            w2.add_tensor(t.name, formats::TensorType::kQ5_0, t.dims,
                          std::vector<uint8_t>(22 * t.dims[0] / 32 * t.dims[1]));
        } else {
            w2.add_tensor(t.name, t.type, t.dims,
                          std::vector<uint8_t>(t.data.begin(), t.data.end()));
        }
    }
    const std::string p2 = ::testing::TempDir() + "/pagoda_q5_0.gguf";
    ASSERT_TRUE(w2.write(p2).ok());
    m = Model::load(p2);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.error().message.find("'blk.0.ffn_up.weight' has type Q5_0, which is not "
                                     "supported yet"),
              std::string::npos)
        << m.error().message;
}

}  // namespace
}  // namespace pagoda::model
