// ToolCallStream: outputs fed in pieces of every size give the same content and calls as
// the whole output, and the streamed deltas reassemble to the final calls.
#include "server/structured.h"

#include <gtest/gtest.h>

namespace pagoda::server {
namespace {

using json = nlohmann::json;

struct Result {
    std::string content;  // streamed content
    json calls;           // reassembled from the deltas
    json final_calls;     // calls()
    std::string final_content;
};

Result run(const ToolRequest& t, const std::string& out, size_t piece) {
    ToolCallStream s(t);
    Result r;
    r.calls = json::array();
    auto apply = [&](const ToolCallStream::Delta& d) {
        r.content += d.content;
        for (const json& c : d.tool_calls) {
            const size_t i = c["index"].get<size_t>();
            if (c.contains("id")) {
                ASSERT_EQ(i, r.calls.size());
                r.calls.push_back(
                    {{"id", c["id"]},
                     {"type", "function"},
                     {"function", {{"name", c["function"]["name"]}, {"arguments", ""}}}});
            }
            ASSERT_LT(i, r.calls.size());
            auto& a = r.calls[i]["function"]["arguments"];
            a = a.get<std::string>() + c["function"]["arguments"].get<std::string>();
        }
    };
    for (size_t i = 0; i < out.size(); i += piece)
        apply(s.push(std::string_view(out).substr(i, piece)));
    apply(s.finish());
    r.final_calls = s.calls();
    r.final_content = s.content();
    return r;
}

// Every piece size: same answer, and the stream agrees with it.
std::vector<Result> all_pieces(const ToolRequest& t, const std::string& out) {
    std::vector<Result> rs;
    for (size_t piece : {size_t(1), size_t(2), size_t(3), size_t(7), out.size()}) {
        Result r = run(t, out, piece);
        EXPECT_EQ(r.calls, r.final_calls) << "piece " << piece;
        EXPECT_EQ(r.content, r.final_content) << "piece " << piece;
        if (!rs.empty()) {
            EXPECT_EQ(r.final_content, rs[0].final_content) << "piece " << piece;
            EXPECT_EQ(r.final_calls.size(), rs[0].final_calls.size()) << "piece " << piece;
            if (r.final_calls.size() != rs[0].final_calls.size()) continue;
            for (size_t i = 0; i < r.final_calls.size(); ++i) {
                EXPECT_EQ(r.final_calls[i]["function"], rs[0].final_calls[i]["function"]);
            }
        }
        rs.push_back(std::move(r));
    }
    return rs;
}

json fn(const json& call) { return call["function"]; }

TEST(ToolCallStream, RequiredCallsStreamAsTheyAreWritten) {
    ToolRequest t{ToolChoice::kRequired, "", true, ToolParser::kLlama3Json};
    const std::string out =
        R"([{"name": "get_weather", "parameters": {"city": "Pa}r\"is", "days": [1, 2]}}, {"name": "now", "parameters": {}}])";
    const Result r = all_pieces(t, out)[0];
    ASSERT_EQ(r.final_calls.size(), 2u);
    EXPECT_EQ(
        fn(r.final_calls[0]),
        (json{{"name", "get_weather"}, {"arguments", R"({"city": "Pa}r\"is", "days": [1, 2]})"}}));
    EXPECT_EQ(fn(r.final_calls[1]), (json{{"name", "now"}, {"arguments", "{}"}}));
    EXPECT_EQ(r.final_content, "");
    EXPECT_NE(r.final_calls[0]["id"], r.final_calls[1]["id"]);
}

TEST(ToolCallStream, NamedCallIsTheArguments) {
    ToolRequest t{ToolChoice::kNamed, "lookup", true, ToolParser::kLlama3Json};
    const Result r = all_pieces(t, R"( {"q": [1, {"b": "]"}]})")[0];
    ASSERT_EQ(r.final_calls.size(), 1u);
    EXPECT_EQ(fn(r.final_calls[0]),
              (json{{"name", "lookup"}, {"arguments", R"({"q": [1, {"b": "]"}]})"}}));
}

TEST(ToolCallStream, AutoReadsEachFamily) {
    struct Case {
        ToolParser parser;
        std::string out, content;
        std::vector<std::pair<std::string, json>> calls;  // name, parsed arguments
    };
    const std::vector<Case> cases = {
        {ToolParser::kHermes,
         "Let me check. <tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>\n"
         "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>",
         "Let me check. ",
         {{"f", {{"x", 1}}}, {"g", json::object()}}},
        {ToolParser::kHermes,
         "No tools: a < b and <tool is not a marker.",
         "No tools: a < b and <tool is not a marker.",
         {}},
        {ToolParser::kLlama3Json,
         R"({"name": "f", "parameters": {"x": "y"}})",
         "",
         {{"f", {{"x", "y"}}}}},
        {ToolParser::kLlama3Json,
         R"(<|python_tag|>{"name": "f", "parameters": {}}; {"name": "g", "parameters": {"k": 2}})",
         "",
         {{"f", json::object()}, {"g", {{"k", 2}}}}},
        {ToolParser::kLlama3Json, "Hello {world}", "Hello {world}", {}},
        {ToolParser::kLlama3Json, "{not json at all", "{not json at all", {}},
        {ToolParser::kMistral,
         R"([TOOL_CALLS] [{"name": "f", "arguments": {"y": "z"}}])",
         "",
         {{"f", {{"y", "z"}}}}},
        {ToolParser::kMistral,
         R"( [{"name": "f", "arguments": "{\"a\": 1}"}])",
         "",
         {{"f", {{"a", 1}}}}},
        {ToolParser::kMistral, "[1, 2] are numbers", "[1, 2] are numbers", {}},
    };
    for (const Case& c : cases) {
        ToolRequest t{ToolChoice::kAuto, "", true, c.parser};
        const Result r = all_pieces(t, c.out)[0];
        EXPECT_EQ(r.final_content, c.content) << c.out;
        ASSERT_EQ(r.final_calls.size(), c.calls.size()) << c.out;
        for (size_t i = 0; i < c.calls.size(); ++i) {
            EXPECT_EQ(fn(r.final_calls[i])["name"], c.calls[i].first) << c.out;
            EXPECT_EQ(json::parse(fn(r.final_calls[i])["arguments"].get<std::string>()),
                      c.calls[i].second)
                << c.out;
        }
    }
}

TEST(ToolCallStream, HermesContentIsNotHeldLongerThanAMarkerCouldBe) {
    ToolCallStream s({ToolChoice::kAuto, "", true, ToolParser::kHermes});
    EXPECT_EQ(s.push("Hello <to").content, "Hello ");  // "<to" may begin <tool_call>
    EXPECT_EQ(s.push("day").content, "<today");
    EXPECT_EQ(s.finish().content, "");
}

TEST(ToolCallStream, WithoutToolsTheOutputIsContent) {
    const Result r =
        all_pieces({ToolChoice::kNone, "", true, ToolParser::kHermes}, "<tool_call>x")[0];
    EXPECT_EQ(r.final_content, "<tool_call>x");
    EXPECT_TRUE(r.final_calls.empty());
}

}  // namespace
}  // namespace pagoda::server
