#include "server/request.h"

#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "model/model.h"

namespace pagoda::server {
namespace {

using json = nlohmann::json;

struct RequestTest : ::testing::Test {
    static void SetUpTestSuite() {
        gguf = new model::OpenedGguf(
            *model::open_gguf(std::string(PAGODA_SOURCE_DIR) + "/models/stories260K.gguf"));
        tok = new tokenizer::Tokenizer(*tokenizer::Tokenizer::from_gguf(*gguf->gguf));
    }
    static inline model::OpenedGguf* gguf = nullptr;
    static inline tokenizer::Tokenizer* tok = nullptr;
    RequestLimits limits{"stories", 64, 512};

    ParsedRequest ok(const char* body, bool chat = false) {
        auto r = parse_generation_request(json::parse(body), chat, limits, *tok);
        if (auto* e = std::get_if<RequestError>(&r)) ADD_FAILURE() << body << ": " << e->message;
        return std::get_if<ParsedRequest>(&r) ? std::get<ParsedRequest>(r) : ParsedRequest{};
    }
    RequestError err(const char* body, bool chat = false) {
        auto r = parse_generation_request(json::parse(body), chat, limits, *tok);
        if (std::get_if<ParsedRequest>(&r)) ADD_FAILURE() << body << " was accepted";
        return std::get_if<RequestError>(&r) ? std::get<RequestError>(r) : RequestError{};
    }
};

TEST_F(RequestTest, MapsCompletionFields) {
    auto p = ok(
        R"({"model": "stories", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0.5, "top_k": 3,
                   "stop": ["."], "n": 2, "seed": 9, "stream": true, "stream_options": {"include_usage": true},
                   "ignore_eos": true, "priority": -2})");
    ASSERT_EQ(p.prompts.size(), 1u);
    EXPECT_EQ(p.prompts[0], tok->encode("Once upon a time"));
    EXPECT_EQ(p.sampling.max_tokens, 8);
    EXPECT_FLOAT_EQ(p.sampling.temperature, 0.5f);
    EXPECT_EQ(p.sampling.top_k, 3);
    EXPECT_EQ(p.sampling.stop, std::vector<std::string>{"."});
    EXPECT_EQ(p.sampling.n, 2);
    EXPECT_EQ(p.sampling.seed, 9u);
    EXPECT_TRUE(p.sampling.ignore_eos);
    EXPECT_TRUE(p.stream && p.include_usage);
    EXPECT_EQ(p.priority, -2);
    EXPECT_EQ(ok(R"({"prompt": "hi"})").sampling.max_tokens,
              16);  // OpenAI's default for completions
}

TEST_F(RequestTest, PromptShapes) {
    EXPECT_EQ(ok(R"({"prompt": [1, 20, 30]})").prompts[0], (std::vector<int32_t>{1, 20, 30}));
    auto many = ok(R"({"prompt": ["a", [5, 6], "b"]})");
    ASSERT_EQ(many.prompts.size(), 3u);
    EXPECT_EQ(many.prompts[1], (std::vector<int32_t>{5, 6}));
    auto chat = ok(
        R"({"messages": [{"role": "user", "content": "Hello"}], "logprobs": true, "top_logprobs": 2})",
        true);
    ASSERT_EQ(chat.prompts.size(), 1u);
    EXPECT_TRUE(chat.chat_logprobs);
    EXPECT_EQ(chat.sampling.logprobs, 2);
}

TEST_F(RequestTest, ErrorsNameTheFieldAndWhatIsAllowed) {
    auto e = err(R"({"model": "gpt-4", "prompt": "x"})");
    EXPECT_EQ(e.status, 404);
    EXPECT_EQ(e.param, "model");
    e = err(R"({"prompt": "x", "temperature": "hot"})");
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "temperature");
    EXPECT_NE(e.message.find("'temperature' must be a number, got string"), std::string::npos)
        << e.message;
    EXPECT_EQ(err(R"({"prompt": "x", "max_tokens": 0})").param, "max_tokens");
    EXPECT_EQ(err(R"({"max_tokens": 3})").message, "'prompt' is required");
    EXPECT_EQ(err(R"({"prompt": "x"})", true).message, "'messages' is required");
    EXPECT_NE(err(R"({"prompt": [1, 99999]})").message.find("out of range [0, 512)"),
              std::string::npos);
    EXPECT_NE(err(R"({"prompt": [1, 2.5]})").message.find("list of integers"), std::string::npos);
    EXPECT_NE(err(R"([1, 2])").message.find("JSON object"), std::string::npos);
    EXPECT_NE(err(R"({"prompt": "x", "n": 1e30})").message.find("'n' is out of range"),
              std::string::npos);
    // Context length: both lengths are named.
    std::string long_prompt = R"({"prompt": [)";
    for (int i = 0; i < 70; ++i) long_prompt += (i ? ",5" : "5");
    long_prompt += "]}";
    e = err(long_prompt.c_str());
    EXPECT_NE(e.message.find("maximum context length is 64 tokens"), std::string::npos)
        << e.message;
    EXPECT_NE(e.message.find("70 tokens"), std::string::npos) << e.message;
    e = err(R"({"prompt": [5, 6, 7], "max_tokens": 62})");
    EXPECT_NE(e.message.find("you requested 65 tokens (3 in the prompt, 62 for the completion)"),
              std::string::npos)
        << e.message;
}

// A field the server would ignore is refused, naming it (issue 19): an ignored constraint
// is worse than a refusal. OpenAI's advisory fields pass.
TEST_F(RequestTest, FieldsNotHonouredAreRefusedByName) {
    auto e = err(R"({"prompt": "x", "echo": true})");
    EXPECT_EQ(e.param, "echo");
    EXPECT_NE(e.message.find("'echo' is not supported"), std::string::npos) << e.message;
    e = err(R"({"messages": [{"role": "user", "content": "Hi"}], "functions": []})", true);
    EXPECT_EQ(e.param, "functions");
    EXPECT_NE(e.message.find("send 'tools'"), std::string::npos) << e.message;
    EXPECT_EQ(err(R"({"prompt": "x", "messages": []})").param, "messages");
    EXPECT_EQ(err(R"({"prompt": "x", "tools": []})").param, "tools");
    EXPECT_EQ(
        err(R"({"messages": [{"role": "user", "content": "Hi"}], "tool_choice": "required"})", true)
            .param,
        "tool_choice");
    ok(R"({"prompt": "x", "user": "someone", "store": false})");
}

// Each way of asking for a shape becomes a grammar on the sampling parameters.
TEST_F(RequestTest, StructuredOutputFieldsBecomeGrammars) {
    for (
        const char* body :
        {R"({"prompt": "x", "response_format": {"type": "json_object"}})",
         R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"name": "a", "strict": true, "schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}}})",
         R"({"prompt": "x", "guided_json": {"type": "array", "items": {"type": "boolean"}}})",
         R"({"prompt": "x", "guided_json": "{\"type\": \"string\"}"})",
         R"({"prompt": "x", "guided_regex": "[a-z]+@(foo|bar)\\.com"})",
         R"({"prompt": "x", "guided_choice": ["yes", "no"]})",
         R"({"prompt": "x", "guided_grammar": "root ::= \"a\"+"})",
         R"({"prompt": "x", "structured_outputs": {"choice": ["a", "b"]}})"}) {
        auto p = ok(body);
        ASSERT_TRUE(p.sampling.constraint != nullptr) << body;
        EXPECT_TRUE(p.sampling.constraint->grammar && p.sampling.constraint->masks) << body;
    }
    EXPECT_EQ(ok(R"({"prompt": "x", "response_format": {"type": "text"}})").sampling.constraint,
              nullptr);
    EXPECT_EQ(ok(R"({"prompt": "x"})").sampling.constraint, nullptr);
    // Cached by grammar: two requests with the same schema share the compiled grammar.
    ConstraintCache cache;
    limits.constraints = &cache;
    auto a = ok(R"({"prompt": "x", "guided_choice": ["yes", "no"]})");
    auto b = ok(R"({"prompt": "y", "guided_choice": ["yes", "no"]})");
    EXPECT_EQ(a.sampling.constraint, b.sampling.constraint);
    EXPECT_EQ(cache.size(), 1u);
}

TEST_F(RequestTest, BadStructuredOutputsSayWhy) {
    struct Case {
        const char* body;
        const char* param;
        const char* says;
    };
    for (
        const Case& c : std::initializer_list<Case>{
            {R"({"prompt": "x", "response_format": {"type": "xml"}})", "response_format",
             "'xml' is not supported"},
            {R"({"prompt": "x", "response_format": {"type": "json_schema"}})", "response_format",
             "needs 'json_schema'"},
            {R"({"prompt": "x", "guided_json": {"type": "string", "pattern": "a+"}})",
             "guided_json", "keyword 'pattern' is not supported"},
            {R"({"prompt": "x", "guided_json": {"type": "strange"}})", "guided_json", "strange"},
            {R"({"prompt": "x", "guided_regex": "(a"})", "guided_regex", "missing ')'"},
            {R"({"prompt": "x", "guided_regex": "(a)\\1"})", "guided_regex", "backreferences"},
            {R"({"prompt": "x", "guided_regex": "(?=a)b"})", "guided_regex", "lookaround"},
            {R"({"prompt": "x", "guided_choice": []})", "guided_choice", "non-empty"},
            {R"({"prompt": "x", "guided_grammar": "root ::= nothing"})", "guided_grammar",
             "does not parse"},
            {R"({"prompt": "x", "guided_grammar": "root ::= [^\\x00-\\U0010FFFF] | x\nx ::= x \"a\""})",
             "guided_grammar", "does not parse"},
            {R"({"prompt": "x", "guided_grammar": "root ::= x\nx ::= \"a\" x"})", "guided_grammar",
             "accepts nothing"},
            {R"({"prompt": "x", "guided_grammar": "root ::= [^\\x00-\\U0010FFFF] \"a\""})",
             "guided_grammar", "accepts nothing"},
            {R"({"prompt": "x", "guided_regex": "a", "guided_choice": ["a"]})", "guided_choice",
             "both constrain"},
        }) {
        auto e = err(c.body);
        EXPECT_EQ(e.param, c.param) << c.body;
        EXPECT_NE(e.message.find(c.says), std::string::npos) << c.body << " -> " << e.message;
    }
}

TEST_F(RequestTest, ToolsAreCheckedAndForcedCallsConstrained) {
    limits.max_model_len = 512;  // the built-in renderer writes the tools into the prompt
    const std::string msgs = R"("messages": [{"role": "user", "content": "Weather?"}])";
    const std::string tools =
        R"("tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
                     {"type": "function", "function": {"name": "now"}}])";
    auto body = [&](const std::string& extra) { return "{" + msgs + ", " + tools + extra + "}"; };
    auto p = ok(body("").c_str(), true);
    EXPECT_EQ(p.tools.choice, ToolChoice::kAuto);  // tools without tool_choice: auto
    EXPECT_EQ(p.sampling.constraint, nullptr);
    p = ok(body(R"(, "tool_choice": "required", "parallel_tool_calls": false)").c_str(), true);
    EXPECT_EQ(p.tools.choice, ToolChoice::kRequired);
    EXPECT_FALSE(p.tools.parallel);
    ASSERT_NE(p.sampling.constraint, nullptr);
    grammar::Matcher m(p.sampling.constraint->grammar);
    EXPECT_TRUE(m.accept(R"([{"name": "get_weather", "parameters": {"city": "Paris"}}])"));
    EXPECT_TRUE(m.can_end());
    grammar::Matcher two(p.sampling.constraint->grammar);  // parallel_tool_calls false: one call
    EXPECT_FALSE(two.accept(R"([{"name": "now", "parameters": {}}, {"name": "now")"));
    grammar::Matcher bad(p.sampling.constraint->grammar);
    EXPECT_FALSE(bad.accept(R"([{"name": "get_weather", "parameters": {}})"));  // city is required
    p = ok(body(R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})")
               .c_str(),
           true);
    EXPECT_EQ(p.tools.choice, ToolChoice::kNamed);
    grammar::Matcher named(p.sampling.constraint->grammar);
    EXPECT_TRUE(named.accept(R"({"city": "Oslo"})"));
    EXPECT_TRUE(named.can_end());

    struct Case {
        std::string body;
        const char* says;
    };
    for (
        const Case& c : std::vector<Case>{
            {body(R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}})"),
             "'nope', which is not in 'tools'"},
            {body(R"(, "tool_choice": "sometimes")"), "'tool_choice' must be"},
            {"{" + msgs + R"(, "tools": [{"type": "function", "function": {"description": "x"}}]})",
             "needs a 'name'"},
            {"{" + msgs + R"(, "tools": [{"type": "function", "function": {"name": "a b"}}]})",
             "needs a 'name'"},
            {"{" + msgs +
                 R"(, "tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]})",
             "used twice"},
            {"{" + msgs +
                 R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}]})",
             "schema of an object"},
            {"{" + msgs +
                 R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string", "pattern": "a"}}}}}], "tool_choice": "required"})",
             "keyword 'pattern' is not supported"},
            {body(R"(, "tool_choice": "required", "response_format": {"type": "json_object"})"),
             "cannot be combined"},
        }) {
        auto e = err(c.body.c_str(), true);
        EXPECT_NE(e.message.find(c.says), std::string::npos) << c.body << " -> " << e.message;
    }
}

TEST_F(RequestTest, ResumeTokenIdsFollowThePromptAndTheGrammar) {
    // A resumed stream (the router's resume_token_ids): the ids follow the prompt.
    ParsedRequest p = ok(R"({"prompt": [1, 2], "stream": true, "resume_token_ids": [5, 6]})");
    EXPECT_EQ(p.prompts[0], (std::vector<int32_t>{1, 2, 5, 6}));
    EXPECT_EQ(p.resume_ids, (std::vector<int32_t>{5, 6}));
    EXPECT_EQ(err(R"({"prompt": [1, 2], "resume_token_ids": [5]})").param, "resume_token_ids");
    EXPECT_EQ(err(R"({"prompt": [1, 2], "stream": true, "resume_token_ids": ["a"]})").param,
              "resume_token_ids");
    EXPECT_EQ(err(R"({"prompt": [1, 2], "stream": true, "resume_token_ids": [99999]})").param,
              "prompt");
    // With a grammar: the resumed tokens must be output it allows ("{" yes, "hello" no).
    int32_t brace = -1;
    for (int32_t t = 0; t < tok->vocab().size() && brace < 0; ++t) {
        if (tok->token_bytes(t) == "{") brace = t;
    }
    ASSERT_GE(brace, 0);
    const std::string schema = R"("response_format": {"type": "json_object"}, "stream": true)";
    p = ok(
        ("{\"prompt\": [1], " + schema + ", \"resume_token_ids\": [" + std::to_string(brace) + "]}")
            .c_str());
    EXPECT_EQ(p.resume_ids.size(), 1u);
    std::string ids;
    for (int32_t t : tok->encode("hello")) ids += (ids.empty() ? "" : ",") + std::to_string(t);
    const RequestError e =
        err(("{\"prompt\": [1], " + schema + ", \"resume_token_ids\": [" + ids + "]}").c_str());
    EXPECT_NE(e.message.find("leave the request's json_object grammar"), std::string::npos)
        << e.message;
}

}  // namespace
}  // namespace pagoda::server
