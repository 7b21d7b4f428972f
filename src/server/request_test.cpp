#include "server/request.h"

#include <gtest/gtest.h>

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
    e = err(R"({"messages": [{"role": "user", "content": "Hi"}],
                "response_format": {"type": "json_object"}})",
            true);
    EXPECT_EQ(e.param, "response_format");
    EXPECT_NE(e.message.find("structured outputs"), std::string::npos) << e.message;
    EXPECT_EQ(err(R"({"prompt": "x", "guided_json": {}})").param, "guided_json");
    EXPECT_EQ(err(R"({"prompt": "x", "messages": []})").param, "messages");
    const char* tools = R"([{"type": "function", "function": {"name": "f", "parameters": {}}}])";
    e = err(
        fmt::format(R"({{"messages": [{{"role": "user", "content": "Hi"}}], "tools": {}}})", tools)
            .c_str(),
        true);
    EXPECT_EQ(e.param, "tool_choice");
    EXPECT_NE(e.message.find("tool_choice \"none\""), std::string::npos) << e.message;
    EXPECT_EQ(
        err(R"({"messages": [{"role": "user", "content": "Hi"}], "tool_choice": "required"})", true)
            .param,
        "tool_choice");
    ok(fmt::format(R"({{"messages": [{{"role": "user", "content": "Hi"}}], "tools": {},
                       "tool_choice": "none", "user": "u1", "metadata": {{"k": "v"}}}})",
                   tools)
           .c_str(),
       true);
    ok(R"({"prompt": "x", "user": "someone", "store": false})");
}

}  // namespace
}  // namespace pagoda::server
