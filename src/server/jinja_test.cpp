// The Jinja subset against goldens rendered by the reference engine (Python jinja2 with
// Hugging Face's settings; scripts/gen-chat-template-goldens.py) for the Llama 3,
// Qwen2/ChatML, Mistral, Phi-3 (from the phi-3 vocab GGUF), Gemma and Llama 2 templates
// and two templates that exercise whitespace control and the rest of the subset.
#include "server/jinja.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/model.h"
#include "server/chat_template.h"

namespace pagoda::server::jinja {

using json = nlohmann::json;
const std::filesystem::path kDir =
    std::filesystem::path(PAGODA_SOURCE_DIR) / "testdata" / "chat-templates";

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

namespace {

TEST(Jinja, GoldenRenderings) {
    const json sets = json::parse(slurp(kDir / "messages.json"));
    int checked = 0;
    for (const auto& entry : std::filesystem::directory_iterator(kDir)) {
        if (entry.path().extension() != ".jinja") continue;
        const std::string name = entry.path().stem().string();
        auto t = Template::parse(slurp(entry.path()));
        ASSERT_TRUE(t.ok()) << name << ": " << t.error().message;
        for (const auto& [set, messages] : sets.items()) {
            const json ctx = {{"messages", messages},
                              {"bos_token", "<s>"},
                              {"eos_token", "</s>"},
                              {"add_generation_prompt", true}};
            const auto out = kDir / (name + "." + set + ".out");
            const auto err = kDir / (name + "." + set + ".err");
            auto r = t->render(ctx);
            if (std::filesystem::exists(out)) {
                ASSERT_TRUE(r.ok()) << name << "/" << set << ": " << r.error().message;
                EXPECT_EQ(*r, slurp(out)) << name << "/" << set;
            } else {
                ASSERT_TRUE(std::filesystem::exists(err)) << name << "/" << set << " has no golden";
                ASSERT_FALSE(r.ok()) << name << "/" << set << " should raise";
                std::string want = slurp(err);
                want.pop_back();
                EXPECT_NE(r.error().message.find(want), std::string::npos) << r.error().message;
            }
            ++checked;
        }
    }
    EXPECT_EQ(checked, 16);  // 8 templates x 2 message sets
}

// Every statement, filter, test, method and whitespace rule, against the text Python's
// jinja2 renders (testdata/chat-templates/unit_cases.json, kept true by
// tests/chat_templates/unit_cases.py in ctest's chat_templates_test).
TEST(Jinja, UnitCasesMatchJinja2) {
    const nlohmann::ordered_json all =
        nlohmann::ordered_json::parse(slurp(kDir / "unit_cases.json"));
    RenderOptions opts;
    std::tm tm{};
    tm.tm_year = 2026 - 1900;
    tm.tm_mon = 6;
    tm.tm_mday = 26;
    tm.tm_isdst = -1;
    opts.now = std::mktime(&tm);
    int checked = 0;
    for (const auto& c : all["cases"]) {
        const std::string name = c["name"];
        auto t = Template::parse(c["template"].get<std::string>());
        Result<std::string> r =
            t.ok() ? t->render(all["context"], opts) : Result<std::string>(t.error());
        if (c.contains("expect")) {
            EXPECT_TRUE(r.ok()) << name << ": " << r.error().message;
            if (r.ok()) {
                EXPECT_EQ(*r, c["expect"].get<std::string>()) << name;
            }
        } else {
            EXPECT_FALSE(r.ok()) << name << " renders '" << *r << "' but jinja2 fails";
            if (!r.ok() && c.contains("raises")) {
                EXPECT_NE(r.error().message.find(c["raises"].get<std::string>()), std::string::npos)
                    << name << ": " << r.error().message;
            }
        }
        ++checked;
    }
    EXPECT_GE(checked, 80);
}

// Templates come from model files and (with --trust-request-chat-template) from clients:
// hostile ones end in an error, not an overflow or an exhausted machine.
TEST(Jinja, LimitsHoldOnHostileTemplates) {
    auto fails_with = [](const char* src, const char* what) {
        auto t = Template::parse(src);
        ASSERT_TRUE(t.ok()) << src << ": " << t.error().message;
        auto r = t->render(json::object());
        ASSERT_FALSE(r.ok()) << src;
        EXPECT_NE(r.error().message.find(what), std::string::npos) << r.error().message;
    };
    fails_with("{{ 9223372036854775807 + 1 }}", "integer overflow");
    fails_with("{{ 2 ** 64 }}", "integer overflow");
    fails_with("{{ (-9223372036854775807 - 1) // -1 }}", "integer overflow");
    fails_with("{{ ('x' * 4000000) * 100 }}", "larger than 4 MiB");
    fails_with("{% set b = 'y' * 4000000 %}{{ b ~ b ~ b ~ b ~ b }}", "larger than 16 MiB");
    fails_with("{% for i in range(100000) %}{% for j in range(100) %}{% endfor %}{% endfor %}",
               "more than 1000000 loop iterations");
    fails_with("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}", "nested more than 200");
    fails_with("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", "larger than 4 MiB");
}

TEST(Jinja, ErrorsNameTheLine) {
    auto t = Template::parse("line one\n{% for x in xs %}\n{{ x }}\n");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.error().message.find("line 2, column 1: 'for' without 'endfor'"), std::string::npos)
        << t.error().message;
    auto u = Template::parse("text\n  {% include 'other.jinja' %}");
    ASSERT_FALSE(u.ok());
    EXPECT_NE(u.error().message.find("line 2, column 3: unsupported statement 'include'"),
              std::string::npos)
        << u.error().message;
    auto v = Template::parse("{{ 1 + }}");
    ASSERT_FALSE(v.ok());
    auto w = Template::parse("{{ x | frobnicate }}");
    ASSERT_TRUE(w.ok());
    auto r = w->render(json{{"x", 1}});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("no filter named 'frobnicate'"), std::string::npos);
}

TEST(Jinja, Expressions) {
    auto t = Template::parse(
        "{{ 7 // 2 }} {{ 7 % 3 }} {{ 'a' ~ 1 }} {{ [1, 2, 3][-1] }} {{ {'k': 'v'}['k'] }} {{ 'x' "
        "if none else 'y' }} "
        "{{ 'ab' in 'cab' }} {{ 3 not in [1, 2] }} {{ undefined_var is defined }} {{ (1, 2) if "
        "true else 'z' }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.0 }} {{ 'ab' * "
        "2 }}");
    ASSERT_TRUE(t.ok()) << t.error().message;
    auto tr = t->render(json::object());
    ASSERT_TRUE(tr.ok()) << tr.error().message;
    EXPECT_EQ(*tr, "3 1 a1 3 v y True True False [1, 2] -4 2 3.5 1024 1.0 abab");
    auto u = Template::parse(
        "{{ 7 // 2 }} {{ 7 % 3 }} {{ 'a' ~ 1 }} {{ [1, 2, 3][-1] }} {{ {'k': 'v'}['k'] }} {{ 'x' "
        "if none else 'y' }} "
        "{{ 'ab' in 'cab' }} {{ 3 not in [1, 2] }} {{ undefined_var is defined }} {{ d.get('a', 5) "
        "}} {{ s.title() }}");
    ASSERT_TRUE(u.ok()) << u.error().message;
    auto r = u->render(json{{"d", json::object()}, {"s", "hello world"}});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(*r, "3 1 a1 3 v y True True False 5 Hello World");
}

}  // namespace
}  // namespace pagoda::server::jinja

namespace pagoda::server {
namespace {

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
    const auto msgs = nlohmann::json::parse(jinja::slurp(jinja::kDir / "messages.json"))["plain"];
    ChatInput in;
    in.messages = msgs;
    auto r = ChatTemplate::create(tok->vocab(), {})->render(in);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->family, "jinja");
    EXPECT_FALSE(r->add_bos);  // the template writes bos_token itself
    EXPECT_EQ(r->text, jinja::slurp(jinja::kDir / "phi3.plain.out"));
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
