// Which request fields Pagoda honours: anything else is refused with a 400 naming it, so a
// constraint the server would ignore (response_format, tool_choice "required", echo)
// fails at once instead of far from its cause. Fields OpenAI documents as advisory
// (user, metadata, ...) are accepted and ignored. docs/api.md lists them.
#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "server/request.h"

namespace pagoda::server {

namespace {

constexpr std::string_view kCommon[] = {"model",
                                        "max_tokens",
                                        "temperature",
                                        "top_p",
                                        "top_k",
                                        "min_p",
                                        "presence_penalty",
                                        "frequency_penalty",
                                        "repetition_penalty",
                                        "n",
                                        "min_tokens",
                                        "ignore_eos",
                                        "priority",
                                        "stop",
                                        "stop_token_ids",
                                        "logit_bias",
                                        "logprobs",
                                        "stream",
                                        "stream_options",
                                        "seed",
                                        "return_token_ids"};
constexpr std::string_view kCompletions[] = {"prompt"};
constexpr std::string_view kChat[] = {"messages",
                                      "max_completion_tokens",
                                      "top_logprobs",
                                      "add_generation_prompt",
                                      "continue_final_message",
                                      "chat_template",
                                      "chat_template_kwargs",
                                      "documents",
                                      "tools",
                                      "tool_choice",
                                      "parallel_tool_calls"};
// OpenAI documents these as not changing the output.
constexpr std::string_view kAdvisory[] = {"user",         "metadata",         "store",
                                          "service_tier", "prompt_cache_key", "safety_identifier"};
constexpr std::string_view kStructured[] = {
    "response_format", "guided_json",        "guided_regex", "guided_choice",
    "guided_grammar",  "structured_outputs", "functions",    "function_call"};

template <size_t N>
bool in(const std::string_view (&set)[N], std::string_view k) {
    return std::find(std::begin(set), std::end(set), k) != std::end(set);
}

RequestError refuse(const std::string& message, const std::string& param) {
    return RequestError{400, message, "invalid_request_error", param};
}

// tools are rendered into the prompt by the chat template; choosing or parsing calls is
// not done yet, so only tool_choice "none" is honoured (vLLM without a tool parser agrees).
std::optional<RequestError> check_tool_choice(const nlohmann::json& j) {
    const bool has_tools = j.contains("tools") && !j["tools"].is_null();
    auto tc = j.find("tool_choice");
    const bool none = tc != j.end() && tc->is_string() && tc->get<std::string>() == "none";
    if (tc != j.end() && !tc->is_null() && !none) {
        return refuse(fmt::format("tool_choice {} is not supported yet: this server renders tools "
                                  "into the prompt but does not constrain or parse tool calls; "
                                  "send tool_choice \"none\"",
                                  tc->dump()),
                      "tool_choice");
    }
    if (has_tools && !none) {
        return refuse(
            "'tools' with tool_choice \"auto\" (the default) needs tool-call parsing, "
            "which this server does not do yet; send tool_choice \"none\" to render "
            "the tools into the prompt only",
            "tool_choice");
    }
    return std::nullopt;
}

}  // namespace

std::optional<RequestError> check_request_fields(const nlohmann::json& j, bool chat) {
    if (!j.is_object()) return std::nullopt;
    for (const auto& [key, value] : j.items()) {
        const std::string_view k = key;
        if (in(kCommon, k) || in(kAdvisory, k) || (chat ? in(kChat, k) : in(kCompletions, k))) {
            continue;
        }
        if (in(kStructured, k)) {
            return refuse(fmt::format("'{}' is not supported yet: structured outputs (JSON schema, "
                                      "grammars) are not implemented, and an ignored constraint "
                                      "would return unconstrained text",
                                      key),
                          key);
        }
        if (!chat && in(kChat, k)) {
            return refuse(fmt::format("'{}' is a /v1/chat/completions field", key), key);
        }
        return refuse(fmt::format("'{}' is not supported by this server (the fields it honours "
                                  "are listed in docs/api.md); remove it",
                                  key),
                      key);
    }
    return chat ? check_tool_choice(j) : std::nullopt;
}

}  // namespace pagoda::server
