// Chat templates through the Jinja engine: ChatTemplate's rendering and the GGUF's template
// (split from src/template/jinja_test.cpp when the engine moved to src/template/).
#include "server/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/model.h"
#include "template/jinja.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;
const std::filesystem::path kDir =
    std::filesystem::path(PAGODA_SOURCE_DIR) / "testdata" / "chat-templates";

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Expected text rendered by Python jinja2 3.1.6 (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, transformers' tojson) for the same template and context.
TEST(Jinja, SlicesWithStepsTojsonKeywordsAndTagEndsInStrings) {
    auto t = jinja::Template::parse(
        "{{ xs[::-1] }}|{{ xs[1::2] }}|{{ xs[-2:] }}|{{ xs[:-1:2] }}|{{ 'hello'[::-1] }}|"
        "{{ xs[5:1:-2] }}|{{ '}}' }}|{% set s = '%}' %}{{ s }}|{{ d | tojson(indent=2) }}|"
        "{{ d | tojson }}|{{ e | tojson(indent=4) }}|{{ '\u00e9' | tojson(ensure_ascii=True) }}|"
        "{{ '\u00e9' | tojson }}");
    ASSERT_TRUE(t.ok()) << t.error().message;
    const nlohmann::json ctx = {
        {"xs", {1, 2, 3, 4, 5, 6}},
        {"d", {{"a", {1, {{"b", nullptr}}}}, {"c", "x"}}},
        {"e", {{"k", nlohmann::json::array()}, {"m", nlohmann::json::object()}}}};
    auto r = t->render(ctx);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(*r,
              "[6, 5, 4, 3, 2, 1]|[2, 4, 6]|[5, 6]|[1, 3, 5]|olleh|[6, 4]|}}|%}|{\n  \"a\": [\n    "
              "1,\n    {\n      \"b\": null\n    }\n  ],\n  \"c\": \"x\"\n}|{\"a\": [1, "
              "{\"b\": null}], \"c\": \"x\"}|{\n    \"k\": [],\n    \"m\": {}\n}|\"\\u00e9\"|"
              "\"\u00e9\"");
    auto z = jinja::Template::parse("{{ xs[::0] }}");
    ASSERT_TRUE(z.ok());
    auto zr = z->render(ctx);
    ASSERT_FALSE(zr.ok());
    EXPECT_NE(zr.error().message.find("slice step cannot be zero"), std::string::npos);
    auto k = jinja::Template::parse("{{ xs | join(sep=',') }}");
    ASSERT_TRUE(k.ok());
    auto kr = k->render(ctx);
    ASSERT_FALSE(kr.ok());
    EXPECT_NE(kr.error().message.find(
                  "filter 'join' got an unexpected keyword argument 'sep' (allowed: d, attribute)"),
              std::string::npos)
        << kr.error().message;
}

TEST(ChatTemplate, ModelTemplateFromGgufRendersWithJinja) {
    auto g = model::open_gguf(std::string(PAGODA_SOURCE_DIR) +
                              "/testdata/tokenizer-vectors/ggml-vocab-phi-3.gguf");
    ASSERT_TRUE(g.ok()) << g.error().message;
    auto tok = tokenizer::Tokenizer::from_gguf(*g->gguf);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const auto msgs = nlohmann::json::parse(slurp(kDir / "messages.json"))["plain"];
    ChatInput in;
    in.messages = msgs;
    auto r = ChatTemplate::create(tok->vocab(), {})->render(in);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->family, "jinja");
    EXPECT_FALSE(r->add_bos);  // the template writes bos_token itself
    EXPECT_EQ(r->text, slurp(kDir / "phi3.plain.out"));
}

TEST(ChatTemplate, DefaultWithoutTemplateAndBadMessages) {
    tokenizer::Vocab v;
    auto in = read_chat_input(
        nlohmann::ordered_json::parse(R"({"messages": [{"role": "user", "content": "Hi"}]})"));
    ASSERT_TRUE(std::holds_alternative<ChatInput>(in));
    auto r = ChatTemplate::create(v, {})->render(std::get<ChatInput>(in));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->family, "default");
    EXPECT_EQ(r->text, "User: Hi\nAssistant:");
    EXPECT_TRUE(r->add_bos);
    auto bad = read_chat_input(
        nlohmann::ordered_json::parse(R"({"messages": [{"role": "user", "content": 5}]})"));
    ASSERT_TRUE(std::holds_alternative<ChatInputError>(bad));
    EXPECT_NE(std::get<ChatInputError>(bad).message.find("messages[0].content"), std::string::npos);
}

TEST(ChatTemplate, BuiltInRendersToolsDocumentsAndCallsNeverDropsThem) {
    tokenizer::Vocab v;
    auto in = read_chat_input(nlohmann::ordered_json::parse(R"({"messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
        "tools": [{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object"}}}],
        "documents": [{"title": "Guide", "text": "Oslo is in Norway."}]})"));
    ASSERT_TRUE(std::holds_alternative<ChatInput>(in)) << std::get<ChatInputError>(in).message;
    auto r = ChatTemplate::create(v, {})->render(std::get<ChatInput>(in));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->text,
              "System: You can call these tools. To call one, answer with JSON {\"name\": NAME, "
              "\"parameters\": {...}}:\n{\"name\":\"get_weather\",\"parameters\":{\"type\":"
              "\"object\"}}\nDocuments:\n[1] Guide: Oslo is in Norway.\n"
              "User: Weather?\n"
              "Assistant: [{\"name\":\"get_weather\",\"parameters\":{\"city\":\"Oslo\"}}]\n"
              "Tool: sunny\nAssistant:");
    // Template arguments mean nothing to a built-in renderer: refused, naming the fix.
    auto kw = read_chat_input(nlohmann::ordered_json::parse(
        R"({"messages": [{"role": "user", "content": "Hi"}],
            "chat_template_kwargs": {"enable_thinking": false}})"));
    ASSERT_TRUE(std::holds_alternative<ChatInput>(kw));
    auto k = ChatTemplate::create(v, {})->render(std::get<ChatInput>(kw));
    ASSERT_FALSE(k.ok());
    EXPECT_NE(k.error().message.find("--chat-template FILE"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::server
