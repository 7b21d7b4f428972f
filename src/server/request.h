#pragma once
// OpenAI request mapping as a pure function: a parsed JSON body in, prompts as token ids and
// sampling parameters out, or the 400/404 error OpenAI's shape needs (message naming the
// field and what is allowed). No engine, no I/O: the server calls it per request and the
// fuzz target feeds it arbitrary bodies.

#include <fmt/core.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "engine/sampler.h"
#include "server/structured.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server {

// Field readers: a wrong type is a 400 naming the field and the expected type.
struct FieldError {
    std::string message, param;
};

template <typename T>
std::optional<FieldError> read(const nlohmann::json& j, const char* key, T& out,
                               const char* expected) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    bool ok = false;
    if constexpr (std::is_same_v<T, bool>) {
        ok = it->is_boolean();
    } else if constexpr (std::is_integral_v<T>) {
        ok = it->is_number_integer() ||
             (it->is_number_float() && std::floor(it->get<double>()) == it->get<double>());
    } else if constexpr (std::is_floating_point_v<T>) {
        ok = it->is_number();
    } else if constexpr (std::is_same_v<T, std::string>) {
        ok = it->is_string();
    }
    if (!ok)
        return FieldError{fmt::format("'{}' must be {}, got {}", key, expected, it->type_name()),
                          key};
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        const double v = it->get<double>();
        if (!(v >= double(std::numeric_limits<T>::min()) &&
              v <= double(std::numeric_limits<T>::max()))) {
            return FieldError{fmt::format("'{}' is out of range", key), key};
        }
        out = T(v);
    } else {
        out = it->get<T>();
    }
    return std::nullopt;
}

class ChatTemplate;

struct RequestLimits {
    std::string served_model_name;
    int max_model_len = 0;
    int64_t vocab_size = 0;
    const ChatTemplate* chat = nullptr;  // null: the model's template, parsed per request
    // The body again with its key order (tools' parameters keep their order in the prompt,
    // schema properties theirs in the output).
    const nlohmann::ordered_json* ordered_body = nullptr;
    ConstraintCache* constraints = nullptr;  // null: grammars compiled per request
    ToolParser tool_parser = ToolParser::kLlama3Json;
    // The model's sampling defaults (generation_config.json), fields a request leaves out.
    const engine::SamplingParams* defaults = nullptr;
};

struct ParsedRequest {
    std::vector<std::vector<int32_t>> prompts;  // one or more (a list of prompts); chat: one
    engine::SamplingParams sampling;
    int priority = 0;
    bool stream = false, include_usage = false, chat_logprobs = false;
    // vLLM's return_token_ids: choices carry "token_ids" (and "prompt_token_ids"), so a
    // router can resume a broken stream on another replica from the exact tokens.
    bool return_token_ids = false;
    // Pagoda's resume_token_ids (sent by `pagoda router` when it resumes a broken stream on
    // this replica): tokens already generated and streamed to the client. They follow the
    // prompt (prompts[0] ends with them), the grammar and the tool-call parser replay them,
    // and only what follows is generated and sent.
    std::vector<int32_t> resume_ids;
    ToolRequest tools;  // chat: tool_choice and how to read calls from the output
};

struct RequestError {
    int status = 400;
    std::string message, type = "invalid_request_error", param;
};

// A field the endpoint does not honour, refused by name (request_fields.cpp); OpenAI's
// advisory fields (user, metadata, ...) pass.
std::optional<RequestError> check_request_fields(const nlohmann::json& body, bool chat);

// Maps a /v1/completions (chat = false) or /v1/chat/completions body.
std::variant<ParsedRequest, RequestError> parse_generation_request(const nlohmann::json& body,
                                                                   bool chat,
                                                                   const RequestLimits& limits,
                                                                   const tokenizer::Tokenizer& tok);

}  // namespace pagoda::server
