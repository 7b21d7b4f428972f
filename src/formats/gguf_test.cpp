#include "formats/gguf.h"

#include <gtest/gtest.h>

#include <string>

#include "base/mapped_file.h"
#include "formats/gguf_writer.h"

namespace pagoda::formats {
namespace {

std::vector<uint8_t> f32_bytes(const std::vector<float>& xs) {
    std::vector<uint8_t> b(xs.size() * 4);
    std::memcpy(b.data(), xs.data(), b.size());
    return b;
}

GgufWriter sample_writer() {
    GgufWriter w;
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.block_count", 2);
    w.add_f32("llama.rope.freq_base", 10000.0f);
    w.add_bool("flag", true);
    w.add_string_array("tokenizer.ggml.tokens", {"a", "b", "c"});
    GgufValue nested;
    nested.type = GgufType::kArray;
    nested.elem_type = GgufType::kArray;
    for (int k = 0; k < 2; ++k) {
        GgufValue inner;
        inner.type = GgufType::kArray;
        inner.elem_type = GgufType::kI64;
        for (int j = 0; j <= k; ++j) {
            GgufValue e;
            e.type = GgufType::kI64;
            e.i = -j;
            inner.array.push_back(e);
        }
        nested.array.push_back(inner);
    }
    w.add("nested", nested);
    w.add_tensor("w", TensorType::kF32, {4, 2}, f32_bytes({1, 2, 3, 4, 5, 6, 7, 8}));
    w.add_tensor("v", TensorType::kF32, {3}, f32_bytes({9, 10, 11}));
    return w;
}

TEST(Gguf, WriterOutputParsesBack) {
    auto bytes = sample_writer().serialize();
    auto g = GgufFile::parse(bytes, "mem");
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_EQ(g->version(), 3u);
    EXPECT_EQ(*g->get_string("general.architecture"), "llama");
    EXPECT_EQ(*g->get_int("llama.block_count"), 2);
    EXPECT_EQ(*g->get_float("llama.rope.freq_base"), 10000.0);
    EXPECT_TRUE(g->get_bool_or("flag", false));
    const GgufValue* nested = g->find("nested");
    ASSERT_NE(nested, nullptr);
    ASSERT_EQ(nested->array.size(), 2u);
    EXPECT_EQ(nested->array[1].array[1].i, -1);
    const GgufTensorInfo* w = g->find_tensor("w");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->num_elems, 8u);
    float x;
    std::memcpy(&x, w->data.data() + 4 * 5, 4);
    EXPECT_EQ(x, 6.0f);
    const GgufTensorInfo* v = g->find_tensor("v");
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->data.data() - bytes.data(), w->data.data() - bytes.data() + 32);
}

TEST(Gguf, ReadsBundledModel) {
    auto f = MappedFile::open(PAGODA_SOURCE_DIR "/models/stories260K.gguf");
    ASSERT_TRUE(f.ok()) << f.error().message;
    auto g = GgufFile::parse(f->bytes(), "stories260K.gguf");
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_EQ(g->tensors().size(), 48u);
    EXPECT_EQ(*g->get_int("llama.embedding_length"), 64);
    EXPECT_EQ(g->find("tokenizer.ggml.tokens")->array.size(), 512u);
}

TEST(Gguf, EveryTruncationIsACleanError) {
    auto bytes = sample_writer().serialize();
    for (size_t n = 0; n < bytes.size(); ++n) {
        if (n >= bytes.size() - 20) continue;  // cut inside the last tensor's padding: still valid
        std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + long(n));
        auto g = GgufFile::parse(cut, "cut");
        EXPECT_FALSE(g.ok()) << "accepted a file truncated to " << n << " bytes";
        if (!g.ok()) {
            EXPECT_FALSE(g.error().message.empty());
        }
    }
}

TEST(Gguf, RejectsBadMagicVersionAndHugeCounts) {
    auto bytes = sample_writer().serialize();
    auto bad = bytes;
    bad[0] = 'X';
    auto g = GgufFile::parse(bad, "f");
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.error().message.find("not a GGUF file"), std::string::npos);

    bad = bytes;
    bad[4] = 9;
    g = GgufFile::parse(bad, "f");
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.error().message.find("version 9"), std::string::npos);

    bad = bytes;
    for (int k = 0; k < 8; ++k) bad[16 + k] = 0xff;  // metadata count
    g = GgufFile::parse(bad, "f");
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.error().message.find("metadata count"), std::string::npos);
}

// K-quant tensors: rows must be whole 256-weight super-blocks, and the data must lie in
// the file; both errors name the tensor.
TEST(Gguf, KQuantBlockSizeAndTruncationNameTheTensor) {
    {
        GgufWriter w;
        w.add_tensor("blk.0.ffn_up.weight", TensorType::kQ4_K, {256, 2},
                     std::vector<uint8_t>(144 * 2));
        auto bytes = w.serialize();
        // dims[0] after the header (24), the name (8 + 19) and the dim count (4)
        const size_t dim0 = 24 + 8 + 19 + 4;
        ASSERT_EQ(bytes[dim0 + 1], 1);  // 256, little-endian
        bytes[dim0] = 100;
        bytes[dim0 + 1] = 0;
        auto g = GgufFile::parse(bytes, "f");
        ASSERT_FALSE(g.ok());
        EXPECT_NE(g.error().message.find("tensor 'blk.0.ffn_up.weight' row length 100 is not a "
                                         "multiple of the Q4_K block size 256"),
                  std::string::npos)
            << g.error().message;
    }
    GgufWriter w;
    w.add_tensor("output.weight", TensorType::kQ6_K, {256, 4}, std::vector<uint8_t>(210 * 4));
    auto bytes = w.serialize();
    bytes.resize(bytes.size() - 300);  // the last rows are cut off
    auto g = GgufFile::parse(bytes, "f");
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.error().message.find("tensor 'output.weight' data"), std::string::npos)
        << g.error().message;
    EXPECT_NE(g.error().message.find("truncated"), std::string::npos) << g.error().message;
}

TEST(Gguf, RejectsUnknownTensorType) {
    GgufWriter w;
    w.add_tensor("t", TensorType::kF32, {2}, f32_bytes({1, 2}));
    auto bytes = w.serialize();
    // tensor type field sits right after name (8+1) and dims (4 + 8).
    const size_t type_pos = 24 + 8 + 1 + 4 + 8;
    bytes[type_pos] = 200;
    auto g = GgufFile::parse(bytes, "f");
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.error().message.find("unknown tensor type id 200"), std::string::npos)
        << g.error().message;
}

TEST(TensorType, ParsesNames) {
    EXPECT_EQ(parse_tensor_type("q8_0"), TensorType::kQ8_0);
    EXPECT_EQ(parse_tensor_type("BF16"), TensorType::kBF16);
    EXPECT_FALSE(parse_tensor_type("q9").has_value());
    EXPECT_EQ(tensor_type_name(TensorType::kQ4_K), "Q4_K");
}

}  // namespace
}  // namespace pagoda::formats
