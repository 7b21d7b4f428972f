#include "base/log.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace pagoda {
namespace {

nlohmann::json parsed(const std::string& line) {
    return nlohmann::json::parse(log_line_json("info", line));
}

TEST(LogJson, PairsBecomeFieldsWithTheirTypes) {
    auto j = parsed(
        R"(access id=req-1 route=/v1/completions status=200 ttft_ms=12.5 ok=true reason="no blocks left")");
    EXPECT_EQ(j["level"], "info");
    EXPECT_EQ(j["event"], "access");
    EXPECT_EQ(j["id"], "req-1");
    EXPECT_EQ(j["route"], "/v1/completions");
    EXPECT_EQ(j["status"], 200);
    EXPECT_DOUBLE_EQ(j["ttft_ms"].get<double>(), 12.5);
    EXPECT_EQ(j["ok"], true);
    EXPECT_EQ(j["reason"], "no blocks left");
    EXPECT_FALSE(j.contains("msg"));
    EXPECT_TRUE(parsed("access ttft_ms=-")["ttft_ms"].is_null());
}

TEST(LogJson, TextThatIsNotPairsGoesToMsg) {
    auto j = parsed("listening url=http://127.0.0.1:8000 ready in 2 s");
    EXPECT_EQ(j["url"], "http://127.0.0.1:8000");
    EXPECT_EQ(j["msg"], "ready in 2 s");
    EXPECT_EQ(parsed("started")["event"], "started");
    auto pairs = parsed("tool_call_parser=llama3_json (the default)");
    EXPECT_EQ(pairs["event"], "log");
    EXPECT_EQ(pairs["tool_call_parser"], "llama3_json");
}

TEST(LogJson, QuotesControlCharactersAndOddValuesStayValidJson) {
    auto j = parsed("warn_x path=\"/a b\" err=\"line1\nline2\" hex=0x1f nan=nan");
    EXPECT_EQ(j["path"], "/a b");
    EXPECT_EQ(j["err"], "line1\nline2");
    EXPECT_EQ(j["hex"], "0x1f");  // not a JSON number
    EXPECT_EQ(j["nan"], "nan");
    EXPECT_NO_THROW(parsed("event key=\"unterminated value"));
    EXPECT_NO_THROW(parsed("event \x01\x02 \"\\"));
}

}  // namespace
}  // namespace pagoda
