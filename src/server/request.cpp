#include "server/request.h"

#include <algorithm>

#include "scheduler/limits.h"
#include "server/chat_template.h"

namespace pagoda::server {

using json = nlohmann::json;

std::variant<ParsedRequest, RequestError> parse_generation_request(
    const json& j, bool chat, const RequestLimits& limits, const tokenizer::Tokenizer& tok) {
    auto bad = [](const std::string& msg, const std::string& param) {
        return RequestError{400, msg, "invalid_request_error", param};
    };
    if (!j.is_object()) return bad("the request body must be a JSON object", "");
    ParsedRequest out;

    std::string model = limits.served_model_name;
    if (auto e = read(j, "model", model, "a string")) return bad(e->message, e->param);
    if (model != limits.served_model_name) {
        return RequestError{404,
                            fmt::format("The model `{}` does not exist (this server serves `{}`).",
                                        model, limits.served_model_name),
                            "NotFoundError", "model"};
    }

    // Prompts.
    std::vector<std::vector<int32_t>>& prompts = out.prompts;
    if (chat) {
        if (!j.contains("messages")) return bad("'messages' is required", "messages");
        auto rendered = render_chat(j["messages"], tok.vocab(), true);
        if (!rendered.ok()) return bad(rendered.error().message, "messages");
        prompts.push_back(tok.encode(
            rendered->text,
            {rendered->add_bos ? tokenizer::AddSpecial::kYes : tokenizer::AddSpecial::kNo,
             tokenizer::ParseSpecial::kYes}));
    } else {
        auto it = j.find("prompt");
        if (it == j.end() || it->is_null()) return bad("'prompt' is required", "prompt");
        auto from_ids = [&](const json& a) -> std::optional<std::vector<int32_t>> {
            std::vector<int32_t> ids;
            for (const auto& t : a) {
                if (!t.is_number_integer()) return std::nullopt;
                ids.push_back(int32_t(std::clamp<int64_t>(t.get<int64_t>(), -1, INT32_MAX)));
            }
            return ids;
        };
        if (it->is_string()) {
            prompts.push_back(tok.encode(it->get<std::string>()));
        } else if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) {
            auto ids = from_ids(*it);
            if (!ids) return bad("'prompt' as token ids must be a list of integers", "prompt");
            prompts.push_back(*ids);
        } else if (it->is_array() && !it->empty()) {
            for (const auto& p : *it) {
                if (p.is_string()) {
                    prompts.push_back(tok.encode(p.get<std::string>()));
                } else if (p.is_array()) {
                    auto ids = from_ids(p);
                    if (!ids)
                        return bad("'prompt' as token ids must be a list of integers", "prompt");
                    prompts.push_back(*ids);
                } else {
                    return bad(
                        "'prompt' must be a string, a list of strings, a list of token ids or a "
                        "list of such lists",
                        "prompt");
                }
            }
        } else {
            return bad(
                "'prompt' must be a string, a list of strings, a list of token ids or a list of "
                "such lists",
                "prompt");
        }
        if (prompts.size() > 64)
            return bad(fmt::format("at most 64 prompts per request, got {}", prompts.size()),
                       "prompt");
    }

    engine::SamplingParams& sp = out.sampling;
    sp.max_tokens = chat ? std::max<int>(1, limits.max_model_len) : 16;
    bool max_given = false;
    std::optional<FieldError> e;
    int max_tokens = 0;
    if ((e = read(j, "max_tokens", max_tokens, "an integer"))) return bad(e->message, e->param);
    if (j.contains("max_tokens") && !j["max_tokens"].is_null()) {
        sp.max_tokens = max_tokens;
        max_given = true;
    }
    if (chat && j.contains("max_completion_tokens") && !j["max_completion_tokens"].is_null()) {
        if ((e = read(j, "max_completion_tokens", max_tokens, "an integer")))
            return bad(e->message, e->param);
        sp.max_tokens = max_tokens;
        max_given = true;
    }
    if (sp.max_tokens < 1)
        return bad(fmt::format("'max_tokens' must be >= 1, got {}", sp.max_tokens), "max_tokens");
    if ((e = read(j, "temperature", sp.temperature, "a number"))) return bad(e->message, e->param);
    if ((e = read(j, "top_p", sp.top_p, "a number"))) return bad(e->message, e->param);
    if ((e = read(j, "top_k", sp.top_k, "an integer"))) return bad(e->message, e->param);
    if ((e = read(j, "min_p", sp.min_p, "a number"))) return bad(e->message, e->param);
    if ((e = read(j, "presence_penalty", sp.presence_penalty, "a number")))
        return bad(e->message, e->param);
    if ((e = read(j, "frequency_penalty", sp.frequency_penalty, "a number")))
        return bad(e->message, e->param);
    if ((e = read(j, "repetition_penalty", sp.repetition_penalty, "a number")))
        return bad(e->message, e->param);
    if ((e = read(j, "n", sp.n, "an integer"))) return bad(e->message, e->param);
    if ((e = read(j, "min_tokens", sp.min_tokens, "an integer"))) return bad(e->message, e->param);
    if ((e = read(j, "ignore_eos", sp.ignore_eos, "a boolean"))) return bad(e->message, e->param);
    int64_t seed = -1;
    if ((e = read(j, "seed", seed, "an integer"))) return bad(e->message, e->param);
    if (j.contains("seed") && !j["seed"].is_null()) sp.seed = uint64_t(seed);
    int& priority = out.priority;
    if ((e = read(j, "priority", priority, "an integer"))) return bad(e->message, e->param);
    if (auto it = j.find("stop"); it != j.end() && !it->is_null()) {
        if (it->is_string()) {
            sp.stop = {it->get<std::string>()};
        } else if (it->is_array()) {
            for (const auto& s : *it) {
                if (!s.is_string())
                    return bad("'stop' must be a string or a list of strings", "stop");
                sp.stop.push_back(s.get<std::string>());
            }
        } else {
            return bad("'stop' must be a string or a list of strings", "stop");
        }
    }
    if (auto it = j.find("stop_token_ids"); it != j.end() && !it->is_null()) {
        if (!it->is_array())
            return bad("'stop_token_ids' must be a list of token ids", "stop_token_ids");
        for (const auto& s : *it) {
            if (!s.is_number_integer())
                return bad("'stop_token_ids' must be a list of token ids", "stop_token_ids");
            sp.stop_token_ids.push_back(
                int32_t(std::clamp<int64_t>(s.get<int64_t>(), -1, INT32_MAX)));
        }
    }
    if (auto it = j.find("logit_bias"); it != j.end() && !it->is_null()) {
        if (!it->is_object())
            return bad("'logit_bias' must be an object mapping token ids to numbers", "logit_bias");
        for (const auto& [k, v] : it->items()) {
            char* end = nullptr;
            const long id = std::strtol(k.c_str(), &end, 10);
            if (k.empty() || *end != '\0' || !v.is_number()) {
                return bad(
                    fmt::format("'logit_bias' key '{}' must be a token id with a numeric bias", k),
                    "logit_bias");
            }
            sp.logit_bias.emplace_back(int32_t(std::clamp<long>(id, -1, INT32_MAX)),
                                       v.get<float>());
        }
    }
    bool& chat_logprobs = out.chat_logprobs;
    if (chat) {
        if ((e = read(j, "logprobs", chat_logprobs, "a boolean"))) return bad(e->message, e->param);
        int top = 0;
        if ((e = read(j, "top_logprobs", top, "an integer"))) return bad(e->message, e->param);
        if (top < 0 || top > engine::kMaxLogprobs)
            return bad(
                fmt::format("'top_logprobs' must be in [0, {}], got {}", engine::kMaxLogprobs, top),
                "top_logprobs");
        if (chat_logprobs) sp.logprobs = top;
    } else {
        int lp = -1;
        if ((e = read(j, "logprobs", lp, "an integer"))) return bad(e->message, e->param);
        if (j.contains("logprobs") && !j["logprobs"].is_null()) sp.logprobs = lp;
    }
    bool& stream = out.stream;
    bool& include_usage = out.include_usage;
    if ((e = read(j, "stream", stream, "a boolean"))) return bad(e->message, e->param);
    if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
        if (!it->is_object()) return bad("'stream_options' must be an object", "stream_options");
        if ((e = read(*it, "include_usage", include_usage, "a boolean")))
            return bad("stream_options." + e->message, "stream_options");
    }
    const int64_t vocab = limits.vocab_size;
    if (Status st = sp.validate(int(vocab)); !st.ok()) return bad(st.error().message, "");
    const int max_len = limits.max_model_len;
    for (const auto& p : prompts) {
        if (p.empty()) return bad("the prompt is empty", chat ? "messages" : "prompt");
        for (int32_t id : p) {
            if (id < 0 || id >= vocab)
                return bad(fmt::format("prompt token id {} is out of range [0, {})", id, vocab),
                           "prompt");
        }
        const scheduler::LengthCheck len = scheduler::check_context_length(
            int64_t(p.size()), sp.max_tokens,
            max_given ? scheduler::MaxTokens::kGiven : scheduler::MaxTokens::kCapToContext,
            max_len);
        if (len.verdict == scheduler::LengthVerdict::kPromptTooLong)
            return bad(len.message, chat ? "messages" : "prompt");
        if (len.verdict == scheduler::LengthVerdict::kTotalTooLong)
            return bad(len.message, "max_tokens");
    }

    return out;
}

}  // namespace pagoda::server
