// The Jinja subset against goldens rendered by the reference engine (Python jinja2 with
// Hugging Face's settings; scripts/gen-chat-template-goldens.py) for the Llama 3,
// Qwen2/ChatML, Mistral, Phi-3 (from the phi-3 vocab GGUF), Gemma and Llama 2 templates
// and two templates that exercise whitespace control and the rest of the subset.
#include "template/jinja.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace pagoda::jinja {

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
}  // namespace pagoda::jinja
