// SafetensorsFile: a valid file's tensors, and each kind of damage refused with its reason.
#include "formats/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace pagoda::formats {
namespace {

std::vector<uint8_t> file(const std::string& header, size_t data_bytes) {
    std::vector<uint8_t> b(8 + header.size() + data_bytes, 0);
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) b[size_t(i)] = uint8_t(n >> (8 * i));
    std::memcpy(b.data() + 8, header.data(), header.size());
    return b;
}

std::string parse_error(const std::string& header, size_t data_bytes) {
    const auto b = file(header, data_bytes);
    auto f = SafetensorsFile::parse(b, "x.safetensors");
    return f.ok() ? "" : f.error().message;
}

TEST(Safetensors, ReadsTensorsAndMetadata) {
    const auto b = file(
        R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
        R"("n":{"dtype":"F32","shape":[3],"data_offsets":[12,24]}})",
        24);
    auto f = SafetensorsFile::parse(b, "x.safetensors");
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->metadata().at("format"), "pt");
    const SafetensorsTensor* w = f->find("w");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->shape, (std::vector<uint64_t>{2, 3}));
    EXPECT_EQ(*w->type("x"), TensorType::kBF16);
    EXPECT_EQ(w->data.data(), b.data() + 8 + (b.size() - 8 - 24));
    EXPECT_EQ(f->find("n")->data.size(), 12u);
}

TEST(Safetensors, RefusesDamageWithItsReason) {
    EXPECT_NE(parse_error("{", 0).find("not a JSON object"), std::string::npos);
    EXPECT_NE(parse_error(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8)
                  .find("outside the 8 data bytes"),
              std::string::npos);
    EXPECT_NE(parse_error(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}})", 8)
                  .find("8 bytes for 4 elements of F32"),
              std::string::npos);
    EXPECT_NE(parse_error(R"({"w":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}})", 1)
                  .find("unknown dtype 'Q9'"),
              std::string::npos);
    EXPECT_NE(parse_error(R"({"w":{"dtype":"F32","shape":[1]}})", 4).find("data_offsets"),
              std::string::npos);
    std::vector<uint8_t> tiny = {1, 2, 3};
    EXPECT_FALSE(SafetensorsFile::parse(tiny, "x").ok());
    auto huge = file("{}", 0);
    huge[7] = 0x7f;  // header length far past the file
    EXPECT_NE(SafetensorsFile::parse(huge, "x").error().message.find("exceeds the file"),
              std::string::npos);
    const auto i64 = file(R"({"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8);
    auto f = SafetensorsFile::parse(i64, "x.safetensors");
    ASSERT_TRUE(f.ok());
    EXPECT_NE(f->find("w")->type("x.safetensors").error().message.find("dtype I64"),
              std::string::npos);
}

}  // namespace
}  // namespace pagoda::formats
