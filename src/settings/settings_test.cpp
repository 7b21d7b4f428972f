// The settings table: every default is valid, and text and JSON give the same value and the
// same message for the same input.
#include "settings/settings.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace pagoda::settings {
namespace {

using json = nlohmann::json;

std::string outcome(const Result<Value>& v) {
    return v.ok() ? "ok " + std::to_string(v->number) + v->text : v.error().message;
}

TEST(Settings, DefaultsAreValid) {
    for (const Spec& s : all()) {
        EXPECT_TRUE(parse_text(s, s.default_text).ok()) << s.name;
        EXPECT_EQ(find(s.flag()), &s);
        for (int64_t v : s.tune_grid) EXPECT_TRUE(check(s, v).ok()) << s.name << " " << v;
    }
}

TEST(Settings, TextAndJsonAgree) {
    for (const Spec& s : all()) {
        std::vector<std::pair<std::string, json>> cases;
        if (s.kind == Kind::kInt) {
            for (int64_t v : {s.min - 1, s.min, s.max, s.max + 1, int64_t(9)})
                cases.emplace_back(std::to_string(v), v);
        } else if (s.kind == Kind::kBool) {
            cases = {{"true", true}, {"false", false}};
        }
        for (const auto& [text, j] : cases) {
            EXPECT_EQ(outcome(parse_text(s, text)), outcome(parse_json(s, j))) << s.name;
        }
        if (s.kind != Kind::kBool) {  // strings: the same string either way
            for (const char* t : {"abc", "4GiB", "f16", "7XB"}) {
                if (s.kind == Kind::kInt) continue;  // a JSON string is not an integer
                EXPECT_EQ(outcome(parse_text(s, t)), outcome(parse_json(s, t))) << s.name << t;
            }
        }
    }
}

TEST(Settings, Messages) {
    EXPECT_EQ(check("max_num_seqs", 0).error().message,
              "'max_num_seqs' = 0 is out of range [1, 65536]");
    EXPECT_EQ(check("block_size", 9).error().message,
              "'block_size' = 9: block size 9 is not allowed (allowed: 8, 16, 32, 48, 64, 128)");
    EXPECT_EQ(parse_text(*find("max_num_seqs"), "abc").error().message,
              "'max_num_seqs' must be an integer, got \"abc\"");
    EXPECT_EQ(parse_json(*find("max_num_seqs"), "8").error().message,
              "'max_num_seqs' must be an integer, got \"8\"");
    EXPECT_EQ(parse_text(*find("kv_cache_memory"), "4GiB")->number, int64_t(4) << 30);
    EXPECT_EQ(parse_json(*find("kv_cache_dtype"), "fp16")->text, "f16");
    EXPECT_EQ(lookup("max_num_sequences", is_knob).error().message.substr(0, 48),
              "unknown setting 'max_num_sequences' (known: max_");
    EXPECT_NE(markdown_table().find("| `block_size` | `--block-size` |"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::settings
