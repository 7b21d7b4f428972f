// parse_json_fast against nlohmann::json::parse: the same value whenever it decides, and it
// never accepts what nlohmann refuses.
#include "server/json_body.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <vector>

namespace pagoda::server {
namespace {

using json = nlohmann::json;

// The fast parser's answer agrees with nlohmann's; true when the fast parser decided.
bool agrees(const std::string& text) {
    const std::optional<json> fast = parse_json_fast(text);
    const json ref = json::parse(text, nullptr, false);
    if (!fast) return false;
    EXPECT_FALSE(ref.is_discarded()) << "accepted what nlohmann refuses: " << text;
    if (!ref.is_discarded()) {
        EXPECT_EQ(fast->dump(), ref.dump()) << text;
    }
    return true;
}

TEST(JsonBody, DecidesRequestBodiesAsNlohmannDoes) {
    const std::string chat =
        std::string(
            R"({"messages":[{"role":"user","content":"hi \"there\"\n\u00e9\ud83d\ude00"}],)") +
        R"("temperature":0.7,"top_p":1e-3,"seed":-5,"stop":null,"n":1,"x":[[],{}]})";
    for (const char* text : {
             R"({"model":"m","prompt":"Once upon a time","max_tokens":128,"stream":true})",
             chat.c_str(),
             " \t\r\n{ \"a\" : [ 1 , -0 , 0.5 , 2E+3 , -1.25e-2 , true , false , null ] } \n",
             R"({"a":1,"a":2})",
             R"({"big":18446744073709551615,"neg":-9223372036854775808})",
             "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"",
             R"("\/\b\f\r\t\\")",
             "[]",
             "0",
         }) {
        EXPECT_TRUE(agrees(text)) << "not decided: " << text;
    }
}

TEST(JsonBody, LeavesWhatItDoesNotDecideToNlohmann) {
    for (const char* text : {
             "",
             "{",
             "{\"a\":}",
             "[1,]",
             "01",
             "1.",
             ".5",
             "-",
             "1e",
             "+1",
             "tru",
             "nul",
             "{\"a\" 1}",
             "{1:2}",
             "[1 2]",
             "\"abc",
             "\"\\x\"",
             "\"\\u12\"",
             "\"\\udc00\"",
             "\"\\ud800\"",
             "\"\\ud800\\u0041\"",
             "\"a\x01\"",
             "\"\xc0\xaf\"",
             "\"\xed\xa0\x80\"",
             "\"\xf4\x90\x80\x80\"",
             "\"\xe2\x82\"",
             "1 2",
             "{} x",
             "1e400",
             "18446744073709551616",
             "-9223372036854775809",
             "\xef\xbb\xbf{}",
         }) {
        EXPECT_FALSE(parse_json_fast(text).has_value()) << text;
    }
    std::string deep(300, '[');
    deep += std::string(300, ']');
    EXPECT_FALSE(parse_json_fast(deep).has_value());
    EXPECT_FALSE(json::parse(deep, nullptr, false).is_discarded());  // nlohmann takes it
}

// Random JSON values, written compact or indented.
json random_value(int depth) {
    const int kind = *rc::gen::inRange(0, depth > 3 ? 6 : 8);
    switch (kind) {
        case 0: return nullptr;
        case 1: return *rc::gen::arbitrary<bool>();
        case 2: return *rc::gen::arbitrary<int64_t>();
        case 3: return *rc::gen::arbitrary<uint64_t>();
        case 4: {
            const double d = *rc::gen::arbitrary<double>();
            return std::isfinite(d) ? json(d) : json(0.5);
        }
        case 5: return *rc::gen::arbitrary<std::string>();
        case 6: {
            json a = json::array();
            const int n = *rc::gen::inRange(0, 4);
            for (int i = 0; i < n; ++i) a.push_back(random_value(depth + 1));
            return a;
        }
        default: {
            json o = json::object();
            const int n = *rc::gen::inRange(0, 4);
            for (int i = 0; i < n; ++i) {
                o[*rc::gen::arbitrary<std::string>()] = random_value(depth + 1);
            }
            return o;
        }
    }
}

RC_GTEST_PROP(JsonBody, SameValueAsNlohmannOnValidJson, ()) {
    const json v = random_value(0);
    const int indent = *rc::gen::element(-1, 0, 2);
    // Invalid UTF-8 in a random string is written as U+FFFD (still valid JSON).
    const std::string text =
        v.dump(indent, ' ', *rc::gen::arbitrary<bool>(), json::error_handler_t::replace);
    RC_ASSERT(agrees(text));
}

RC_GTEST_PROP(JsonBody, NeverAcceptsWhatNlohmannRefuses, ()) {
    std::string text = random_value(0).dump(-1, ' ', false, json::error_handler_t::replace);
    // Bytes flipped, cut or inserted.
    const int edits = *rc::gen::inRange(1, 4);
    for (int i = 0; i < edits && !text.empty(); ++i) {
        const size_t at = *rc::gen::inRange<size_t>(0, text.size());
        const char c = *rc::gen::element('"', '\\', ',', ':', '{', '}', '[', ']', '0', 'e', '-',
                                         '.', ' ', '\x01', '\xc3', '\xff', 'u');
        switch (*rc::gen::inRange(0, 3)) {
            case 0: text[at] = c; break;
            case 1: text.erase(at, 1); break;
            default: text.insert(text.begin() + ptrdiff_t(at), c);
        }
    }
    agrees(text);  // decided or not; when decided, the same as nlohmann
}

}  // namespace
}  // namespace pagoda::server
