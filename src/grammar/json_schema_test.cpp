// JSON Schema -> grammar, test-suite style: for each supported keyword a schema with
// documents it must accept (complete matches) and documents it must refuse; and the
// errors for what is not supported.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

namespace pagoda::grammar {
namespace {

using ojson = nlohmann::ordered_json;

bool full_match(const std::shared_ptr<const Grammar>& g, const std::string& text) {
    Matcher m(g);
    return m.accept(text) && m.can_end();
}

struct Case {
    const char* name;
    const char* schema;
    std::vector<const char*> valid, invalid;
};

TEST(JsonSchema, EachKeywordAcceptsValidAndRefusesInvalidDocuments) {
    const std::vector<Case> cases = {
        {"type string",
         R"({"type": "string"})",
         {R"("hi")", R"("a\"b\\c\u00e9")", R"("")"},
         {"hi", "1", R"("a
b")"}},
        {"type integer", R"({"type": "integer"})", {"0", "-12", "42"}, {"1.5", "01", "\"1\"", "-"}},
        {"type number",
         R"({"type": "number"})",
         {"0", "-1.25", "3e10", "2.5E-3"},
         {".5", "1.", "NaN"}},
        {"type boolean/null",
         R"({"type": ["boolean", "null"]})",
         {"true", "false", "null"},
         {"1", "\"true\""}},
        {"enum",
         R"({"enum": ["red", 2, null, {"a": 1}]})",
         {R"("red")", "2", "null", R"({"a":1})"},
         {R"("blue")", "3"}},
        {"const", R"({"const": "only"})", {R"("only")"}, {R"("other")"}},
        {"properties and required",
         R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]})",
         {R"({"name": "Ann"})", R"({"name": "Ann", "age": 3})", R"({ "name" : "Ann" ,
 "age":3 })"},
         {R"({"age": 3})", R"({})", R"({"name": "Ann", "extra": 1})",
          R"({"age": 3, "name": "Ann"})", R"({"name": "Ann",})"}},
        {"all optional",
         R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}})",
         {"{}", R"({"a": 1})", R"({"b": 2})", R"({"a": 1, "b": 2})"},
         {R"({,"b": 2})", R"({"a": 1 "b": 2})"}},
        {"additionalProperties schema",
         R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"], "additionalProperties": {"type": "string"}})",
         {R"({"id": 1})", R"({"id": 1, "x": "y", "z": "w"})"},
         {R"({"id": 1, "x": 2})"}},
        {"any object", R"({"type": "object"})", {"{}", R"({"k": [1, {"n": null}]})"}, {"[]", "1"}},
        {"array items and bounds",
         R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})",
         {"[1]", "[1, 2, 3]"},
         {"[]", "[1, 2, 3, 4]", R"(["a"])"}},
        {"array unbounded",
         R"({"type": "array", "items": {"type": "boolean"}})",
         {"[]", "[true, false, true]"},
         {"[1]"}},
        {"string lengths",
         R"({"type": "string", "minLength": 2, "maxLength": 3})",
         {R"("ab")", R"("abc")"},
         {R"("a")", R"("abcd")"}},
        {"format date",
         R"({"type": "string", "format": "date"})",
         {R"("2026-07-26")"},
         {R"("2026-13-01")", R"("26-07-2026")"}},
        {"format date-time",
         R"({"type": "string", "format": "date-time"})",
         {R"("2026-07-26T10:30:00Z")", R"("2026-07-26T10:30:00.5+02:00")"},
         {R"("2026-07-26 10:30:00")"}},
        {"format uuid",
         R"({"type": "string", "format": "uuid"})",
         {R"("123e4567-e89b-12d3-a456-426614174000")"},
         {R"("123e4567")"}},
        {"anyOf",
         R"({"anyOf": [{"type": "integer"}, {"type": "string"}]})",
         {"1", R"("x")"},
         {"true"}},
        {"oneOf as anyOf", R"({"oneOf": [{"const": 1}, {"const": 2}]})", {"1", "2"}, {"3"}},
        {"nullable", R"({"type": "string", "nullable": true})", {R"("x")", "null"}, {"1"}},
        {"$ref and $defs, recursive",
         R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}}, "$ref": "#/$defs/node"})",
         {R"({"v": 1, "next": null})", R"({"v": 1, "next": {"v": 2, "next": null}})"},
         {R"({"v": 1})"}},
        {"annotations ignored",
         R"({"type": "integer", "title": "T", "description": "d", "default": 1, "examples": [2]})",
         {"5"},
         {"\"5\""}},
        {"true schema", "true", {"1", R"({"a": []})"}, {"tru"}},
    };
    for (const auto& c : cases) {
        auto g = json_schema_grammar(ojson::parse(c.schema));
        ASSERT_TRUE(g.ok()) << c.name << ": " << g.error().message;
        for (const char* v : c.valid)
            EXPECT_TRUE(full_match(*g, v)) << c.name << " should accept " << v;
        for (const char* v : c.invalid)
            EXPECT_FALSE(full_match(*g, v)) << c.name << " should refuse " << v;
    }
    EXPECT_TRUE(full_match(json_object_grammar(), R"({"a": {"b": [1, "x", null]}})"));
    EXPECT_FALSE(full_match(json_object_grammar(), "[1]"));
}

TEST(JsonSchema, UnsupportedOrInvalidSchemasNameTheProblem) {
    auto err = [](const char* schema) {
        auto g = json_schema_grammar(ojson::parse(schema));
        return g.ok() ? std::string("(accepted)") : g.error().message;
    };
    EXPECT_NE(
        err(R"({"type": "string", "pattern": "^a+$"})").find("keyword 'pattern' is not supported"),
        std::string::npos);
    EXPECT_NE(err(R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}})")
                  .find("schema at /properties/n: keyword 'minimum'"),
              std::string::npos)
        << err(R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}})");
    EXPECT_NE(err(R"({"type": "float"})").find("type 'float' is not a JSON Schema type"),
              std::string::npos);
    EXPECT_NE(err(R"({"$ref": "#/$defs/missing"})").find("is not defined"), std::string::npos);
    EXPECT_NE(err(R"({"$ref": "http://example.com/s.json"})").find("is not supported"),
              std::string::npos);
    EXPECT_NE(err(R"({"enum": []})").find("non-empty"), std::string::npos);
    EXPECT_NE(err("false").find("accepts nothing"), std::string::npos);
    EXPECT_NE(err(R"({"type": "array", "minItems": 3, "maxItems": 1})").find("minItems"),
              std::string::npos);
    EXPECT_NE(
        err(R"({"type": "object", "required": ["x"], "properties": {}})").find("'x' has no schema"),
        std::string::npos);
}

}  // namespace
}  // namespace pagoda::grammar

namespace pagoda::grammar {
namespace {

bool full_match(const std::string& gbnf, const std::string& text) {
    auto g = parse_gbnf(gbnf);
    EXPECT_TRUE(g.ok()) << gbnf << ": " << (g.ok() ? "" : g.error().message);
    if (!g.ok()) return false;
    Matcher m(*g);
    return m.accept(text) && m.can_end();
}

TEST(Regex, MatchesWhatPythonsReFullmatchDoes) {
    struct Case {
        const char* pattern;
        std::vector<const char*> yes, no;
    };
    const std::vector<Case> cases = {
        {"[a-z]+@(foo|bar)\\.com",
         {"x@foo.com", "abc@bar.com"},
         {"x@baz.com", "X@foo.com", "x@foo.co"}},
        {"^\\d{3}-\\d{2,4}$", {"123-45", "123-4567"}, {"12-45", "123-4", "123-45678"}},
        {"(?:ab)*c?", {"", "ab", "ababc", "c"}, {"a", "abca"}},
        {"[^\\s,]+(,[^\\s,]+)*", {"a,b,c", "xyz"}, {"a,,b", "a b", ""}},
        {"colou?r|gr[ae]y", {"color", "colour", "grey", "gray"}, {"colr", "graey"}},
        {"\\w+\\.\\W", {"a_1.!", "Z.\xC3\xA9"}, {"a.b", ".!"}},
        {"(?P<year>\\d{4})-(?<m>0[1-9]|1[0-2])", {"2024-01", "1999-12"}, {"2024-13", "24-01"}},
        {".{2}", {"ab", "\xC3\xA9z"}, {"a", "a\n", "abc"}},
        {"[\\u00e9\\x41-\\x43]+",
         {"\xC3\xA9"
          "AB",
          "C"},
         {"D", ""}},
        {"a{2,}?b+?", {"aab", "aaaabb"}, {"ab"}},
        {"[-a]|[a-]", {"-", "a"}, {"b"}},
        {"(a*b)*c{0,3}", {"", "aab", "babcc", "ccc"}, {"a", "cccc"}},
    };
    for (const Case& c : cases) {
        auto g = regex_to_gbnf(c.pattern);
        ASSERT_TRUE(g.ok()) << c.pattern << ": " << g.error().message;
        for (const char* s : c.yes)
            EXPECT_TRUE(full_match(*g, s)) << c.pattern << " should match '" << s << "'";
        for (const char* s : c.no)
            EXPECT_FALSE(full_match(*g, s)) << c.pattern << " should not match '" << s << "'";
    }
}

TEST(Regex, UnsupportedSyntaxIsNamed) {
    for (auto [pattern, says] : std::vector<std::pair<const char*, const char*>>{
             {"(a)\\1", "backreferences"},
             {"a(?=b)", "lookaround"},
             {"(?i)a", "lookaround and inline flags"},
             {"\\bword", "anchor \\b"},
             {"a**+", "possessive"},
             {"*a", "nothing to repeat"},
             {"[z-a]", "backwards"},
             {"a{3,1}", "max below min"},
             {"a{5000}", "above 1000"},
             {"(a", "missing ')'"},
             {"a)", "unbalanced ')'"},
             {"[abc", "unterminated"},
             {"a^b", "only supported at the start"},
             {"(a*)*", "can match the empty string"},
             {"x(a|b?)+", "can match the empty string"},
             {"(()){2,}", "can match the empty string"},
             {"([+@]*){0,56}", "can match the empty string"},
         }) {
        auto g = regex_to_gbnf(pattern);
        ASSERT_FALSE(g.ok()) << pattern;
        EXPECT_NE(g.error().message.find(says), std::string::npos)
            << pattern << ": " << g.error().message;
    }
}

TEST(JsonSchemaRules, PrefixedRulesCombineInOneGrammar) {
    auto a = json_schema_rules(
        nlohmann::ordered_json::parse(
            R"({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]})"),
        "a-");
    auto b = json_schema_rules(nlohmann::ordered_json::parse(R"({"enum": ["p", "q"]})"), "b-");
    ASSERT_TRUE(a.ok() && b.ok());
    const std::string g = "root ::= a-root \" \" b-root\n" + *a + *b + json_primitives_gbnf();
    EXPECT_TRUE(full_match(g, R"({"x": 5} "q")"));
    EXPECT_FALSE(full_match(g, R"({"x": "5"} "q")"));
    EXPECT_FALSE(full_match(g, R"({"x": 5} "r")"));
}

TEST(Grammar, AcceptsSomethingFindsUnproductiveRoots) {
    EXPECT_TRUE(accepts_something(**parse_gbnf("root ::= \"a\" | x\nx ::= \"b\" x")));
    EXPECT_FALSE(accepts_something(**parse_gbnf("root ::= x\nx ::= \"b\" x")));
    EXPECT_FALSE(accepts_something(**parse_gbnf("root ::= [^\\x00-\\U0010FFFF]")));
    EXPECT_TRUE(accepts_something(**parse_gbnf("root ::= \"\"")));
}

}  // namespace
}  // namespace pagoda::grammar
