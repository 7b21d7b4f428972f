// Which request fields Pagoda honours: anything else is refused with a 400 naming it, so a
// constraint the server would ignore (echo, suffix, best_of, ...)
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
                                        "return_token_ids",
                                        "resume_token_ids"};
constexpr std::string_view kCompletions[] = {"prompt"};
// Structured outputs (server/structured.h), on both endpoints.
constexpr std::string_view kStructured[] = {"response_format", "guided_json",
                                            "guided_regex",    "guided_choice",
                                            "guided_grammar",  "structured_outputs"};
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
// OpenAI's deprecated function calling: refused with the replacement named.
constexpr std::string_view kLegacy[] = {"functions", "function_call"};

template <size_t N>
bool in(const std::string_view (&set)[N], std::string_view k) {
    return std::find(std::begin(set), std::end(set), k) != std::end(set);
}

RequestError refuse(const std::string& message, const std::string& param) {
    return RequestError{400, message, "invalid_request_error", param};
}

}  // namespace

std::optional<RequestError> check_request_fields(const nlohmann::json& j, bool chat) {
    if (!j.is_object()) return std::nullopt;
    for (const auto& [key, value] : j.items()) {
        const std::string_view k = key;
        if (in(kCommon, k) || in(kAdvisory, k) || in(kStructured, k) ||
            (chat ? in(kChat, k) : in(kCompletions, k))) {
            continue;
        }
        if (in(kLegacy, k)) {
            return refuse(fmt::format("'{}' (OpenAI's deprecated function calling) is not "
                                      "supported; send 'tools' and 'tool_choice'",
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
    return std::nullopt;
}

}  // namespace pagoda::server
