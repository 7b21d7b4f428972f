// The implementation of server/request.h (the contract is there).
#include "server/request.h"

#include <algorithm>

#include "grammar/grammar.h"
#include "scheduler/limits.h"
#include "server/chat_template.h"

namespace pagoda::server {

using json = nlohmann::json;

namespace {

RequestError bad(const std::string& msg, const std::string& param) {
    return RequestError{400, msg, "invalid_request_error", param};
}

const char* const kPromptShapes =
    "'prompt' must be a string, a list of strings, a list of token ids or a list of such lists";

std::optional<std::vector<int32_t>> ids_from(const json& a) {
    std::vector<int32_t> ids;
    for (const auto& t : a) {
        if (!t.is_number_integer()) return std::nullopt;
        ids.push_back(int32_t(std::clamp<int64_t>(t.get<int64_t>(), -1, INT32_MAX)));
    }
    return ids;
}

// `prompt` of /v1/completions: a string, ids, or a list of either (at most 64).
std::optional<RequestError> read_completion_prompts(const json& j, const tokenizer::Tokenizer& tok,
                                                    std::vector<std::vector<int32_t>>& prompts) {
    auto it = j.find("prompt");
    if (it == j.end() || it->is_null()) return bad("'prompt' is required", "prompt");
    const char* ids_error = "'prompt' as token ids must be a list of integers";
    if (it->is_string()) {
        prompts.push_back(tok.encode(it->get<std::string>()));
    } else if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) {
        auto ids = ids_from(*it);
        if (!ids) return bad(ids_error, "prompt");
        prompts.push_back(*ids);
    } else if (it->is_array() && !it->empty()) {
        for (const auto& p : *it) {
            if (p.is_string()) {
                prompts.push_back(tok.encode(p.get<std::string>()));
            } else if (p.is_array()) {
                auto ids = ids_from(p);
                if (!ids) return bad(ids_error, "prompt");
                prompts.push_back(*ids);
            } else {
                return bad(kPromptShapes, "prompt");
            }
        }
    } else {
        return bad(kPromptShapes, "prompt");
    }
    if (prompts.size() > 64) {
        return bad(fmt::format("at most 64 prompts per request, got {}", prompts.size()), "prompt");
    }
    return std::nullopt;
}

// `messages` of /v1/chat/completions, rendered with the model's chat template.
std::optional<RequestError> read_chat_prompt(const json& j, const RequestLimits& limits,
                                             const tokenizer::Tokenizer& tok,
                                             std::vector<std::vector<int32_t>>& prompts) {
    auto in =
        read_chat_input(limits.ordered_body ? *limits.ordered_body : nlohmann::ordered_json(j));
    if (auto* e = std::get_if<ChatInputError>(&in)) return bad(e->message, e->param);
    std::shared_ptr<const ChatTemplate> own;
    const ChatTemplate* ct = limits.chat;
    if (ct == nullptr) ct = (own = ChatTemplate::create(tok.vocab(), {})).get();
    const ChatInput& input = std::get<ChatInput>(in);
    auto rendered = ct->render(input);
    if (!rendered.ok()) {
        return bad(rendered.error().message, input.chat_template ? "chat_template" : "messages");
    }
    prompts.push_back(tok.encode(rendered->text, {rendered->add_bos ? tokenizer::AddSpecial::kYes
                                                                    : tokenizer::AddSpecial::kNo,
                                                  tokenizer::ParseSpecial::kYes}));
    return std::nullopt;
}

// max_tokens (and chat's max_completion_tokens); `given` says whether the client set one.
std::optional<RequestError> read_max_tokens(const json& j, bool chat, int max_model_len,
                                            engine::SamplingParams& sp, bool& given) {
    sp.max_tokens = chat ? std::max<int>(1, max_model_len) : 16;
    given = false;
    for (const char* key : {"max_tokens", "max_completion_tokens"}) {
        if (!chat && std::string_view(key) == "max_completion_tokens") continue;
        if (!j.contains(key) || j[key].is_null()) continue;
        int v = 0;
        if (auto e = read(j, key, v, "an integer")) return bad(e->message, e->param);
        sp.max_tokens = v;
        given = true;
    }
    if (sp.max_tokens < 1) {
        return bad(fmt::format("'max_tokens' must be >= 1, got {}", sp.max_tokens), "max_tokens");
    }
    return std::nullopt;
}

// The scalar sampling fields, each with its type.
std::optional<RequestError> read_sampling_scalars(const json& j, engine::SamplingParams& sp,
                                                  int& priority) {
    std::optional<FieldError> e;
    if ((e = read(j, "temperature", sp.temperature, "a number")) ||
        (e = read(j, "top_p", sp.top_p, "a number")) ||
        (e = read(j, "top_k", sp.top_k, "an integer")) ||
        (e = read(j, "min_p", sp.min_p, "a number")) ||
        (e = read(j, "presence_penalty", sp.presence_penalty, "a number")) ||
        (e = read(j, "frequency_penalty", sp.frequency_penalty, "a number")) ||
        (e = read(j, "repetition_penalty", sp.repetition_penalty, "a number")) ||
        (e = read(j, "n", sp.n, "an integer")) ||
        (e = read(j, "min_tokens", sp.min_tokens, "an integer")) ||
        (e = read(j, "ignore_eos", sp.ignore_eos, "a boolean")) ||
        (e = read(j, "priority", priority, "an integer"))) {
        return bad(e->message, e->param);
    }
    int64_t seed = -1;
    if ((e = read(j, "seed", seed, "an integer"))) return bad(e->message, e->param);
    if (j.contains("seed") && !j["seed"].is_null()) sp.seed = uint64_t(seed);
    return std::nullopt;
}

// stop (strings) and stop_token_ids.
std::optional<RequestError> read_stops(const json& j, engine::SamplingParams& sp) {
    if (auto it = j.find("stop"); it != j.end() && !it->is_null()) {
        const char* msg = "'stop' must be a string or a list of strings";
        if (it->is_string()) {
            sp.stop = {it->get<std::string>()};
        } else if (it->is_array()) {
            for (const auto& s : *it) {
                if (!s.is_string()) return bad(msg, "stop");
                sp.stop.push_back(s.get<std::string>());
            }
        } else {
            return bad(msg, "stop");
        }
    }
    if (auto it = j.find("stop_token_ids"); it != j.end() && !it->is_null()) {
        const char* msg = "'stop_token_ids' must be a list of token ids";
        if (!it->is_array()) return bad(msg, "stop_token_ids");
        for (const auto& s : *it) {
            if (!s.is_number_integer()) return bad(msg, "stop_token_ids");
            sp.stop_token_ids.push_back(
                int32_t(std::clamp<int64_t>(s.get<int64_t>(), -1, INT32_MAX)));
        }
    }
    return std::nullopt;
}

std::optional<RequestError> read_logit_bias(const json& j, engine::SamplingParams& sp) {
    auto it = j.find("logit_bias");
    if (it == j.end() || it->is_null()) return std::nullopt;
    if (!it->is_object()) {
        return bad("'logit_bias' must be an object mapping token ids to numbers", "logit_bias");
    }
    for (const auto& [k, v] : it->items()) {
        char* end = nullptr;
        const long id = std::strtol(k.c_str(), &end, 10);
        if (k.empty() || *end != '\0' || !v.is_number()) {
            return bad(
                fmt::format("'logit_bias' key '{}' must be a token id with a numeric bias", k),
                "logit_bias");
        }
        sp.logit_bias.emplace_back(int32_t(std::clamp<long>(id, -1, INT32_MAX)), v.get<float>());
    }
    return std::nullopt;
}

// Chat: logprobs (bool) + top_logprobs; completions: logprobs (int).
std::optional<RequestError> read_logprobs(const json& j, bool chat, ParsedRequest& out) {
    std::optional<FieldError> e;
    if (!chat) {
        int lp = -1;
        if ((e = read(j, "logprobs", lp, "an integer"))) return bad(e->message, e->param);
        if (j.contains("logprobs") && !j["logprobs"].is_null()) out.sampling.logprobs = lp;
        return std::nullopt;
    }
    if ((e = read(j, "logprobs", out.chat_logprobs, "a boolean"))) return bad(e->message, e->param);
    int top = 0;
    if ((e = read(j, "top_logprobs", top, "an integer"))) return bad(e->message, e->param);
    if (top < 0 || top > engine::kMaxLogprobs) {
        return bad(
            fmt::format("'top_logprobs' must be in [0, {}], got {}", engine::kMaxLogprobs, top),
            "top_logprobs");
    }
    if (out.chat_logprobs) out.sampling.logprobs = top;
    return std::nullopt;
}

std::optional<RequestError> read_stream_options(const json& j, ParsedRequest& out) {
    if (auto e = read(j, "stream", out.stream, "a boolean")) return bad(e->message, e->param);
    if (auto e = read(j, "return_token_ids", out.return_token_ids, "a boolean")) {
        return bad(e->message, e->param);
    }
    auto it = j.find("stream_options");
    if (it == j.end() || it->is_null()) return std::nullopt;
    if (!it->is_object()) return bad("'stream_options' must be an object", "stream_options");
    if (auto e = read(*it, "include_usage", out.include_usage, "a boolean")) {
        return bad("stream_options." + e->message, "stream_options");
    }
    return std::nullopt;
}

// resume_token_ids: a streamed request with one prompt and one sample; appended to the
// prompt (its ids are checked with the prompt's).
std::optional<RequestError> read_resume(const json& j, ParsedRequest& out) {
    auto it = j.find("resume_token_ids");
    if (it == j.end() || it->is_null()) return std::nullopt;
    const char* param = "resume_token_ids";
    if (!it->is_array()) return bad("'resume_token_ids' must be a list of token ids", param);
    if (!out.stream || out.prompts.size() != 1 || out.sampling.n != 1) {
        return bad(
            "'resume_token_ids' resumes one streamed sample: it needs \"stream\": true, "
            "one prompt and n = 1",
            param);
    }
    for (const json& v : *it) {
        if (!v.is_number_integer()) return bad("'resume_token_ids' must hold integers", param);
        out.resume_ids.push_back(v.get<int32_t>());
    }
    out.prompts[0].insert(out.prompts[0].end(), out.resume_ids.begin(), out.resume_ids.end());
    return std::nullopt;
}

// The resumed tokens must be output the request's grammar allows (the engine replays them).
std::optional<RequestError> check_resume_grammar(const ParsedRequest& out,
                                                 const tokenizer::Tokenizer& tok) {
    if (out.resume_ids.empty() || !out.sampling.constraint) return std::nullopt;
    grammar::Matcher m(out.sampling.constraint->grammar);
    for (size_t i = 0; i < out.resume_ids.size(); ++i) {
        if (!m.accept(tok.token_bytes(out.resume_ids[i]))) {
            return bad(fmt::format("'resume_token_ids' leave the request's {} grammar at token {} "
                                   "(id {})",
                                   out.sampling.constraint->kind, i, out.resume_ids[i]),
                       "resume_token_ids");
        }
    }
    return std::nullopt;
}

// Every prompt: non-empty, ids in the vocabulary, within the context (scheduler/limits.h).
std::optional<RequestError> check_prompts(const ParsedRequest& out, bool chat, bool max_given,
                                          const RequestLimits& limits) {
    const char* param = chat ? "messages" : "prompt";
    for (const auto& p : out.prompts) {
        if (p.empty()) return bad("the prompt is empty", param);
        for (int32_t id : p) {
            if (id < 0 || id >= limits.vocab_size) {
                return bad(fmt::format("prompt token id {} is out of range [0, {})", id,
                                       limits.vocab_size),
                           "prompt");
            }
        }
        const scheduler::LengthCheck len = scheduler::check_context_length(
            int64_t(p.size()), out.sampling.max_tokens,
            max_given ? scheduler::MaxTokens::kGiven : scheduler::MaxTokens::kCapToContext,
            limits.max_model_len);
        if (len.verdict == scheduler::LengthVerdict::kPromptTooLong) return bad(len.message, param);
        if (len.verdict == scheduler::LengthVerdict::kTotalTooLong) {
            return bad(len.message, "max_tokens");
        }
    }
    return std::nullopt;
}

// Structured outputs and tools: the grammar the output must follow, compiled (or cached).
std::optional<RequestError> read_constraint(const json& j, bool chat, const RequestLimits& limits,
                                            ParsedRequest& out) {
    if (!shapes_output(j)) {  // free text: nothing to read in key order
        out.tools.parser = limits.tool_parser;
        return std::nullopt;
    }
    auto shape =
        read_output_shape(limits.ordered_body ? *limits.ordered_body : nlohmann::ordered_json(j),
                          chat, limits.tool_parser);
    if (auto* e = std::get_if<RequestError>(&shape)) return *e;
    const OutputShape& s = std::get<OutputShape>(shape);
    out.tools = s.tools;
    if (s.kind.empty()) return std::nullopt;
    auto c = limits.constraints ? limits.constraints->get(s) : compile_constraint(s);
    if (!c.ok()) return bad(c.error().message, s.field);
    out.sampling.constraint = *c;
    return std::nullopt;
}

}  // namespace

std::variant<ParsedRequest, RequestError> parse_generation_request(
    const json& j, bool chat, const RequestLimits& limits, const tokenizer::Tokenizer& tok) {
    if (!j.is_object()) return bad("the request body must be a JSON object", "");
    std::string model = limits.served_model_name;
    if (auto e = read(j, "model", model, "a string")) return bad(e->message, e->param);
    if (model != limits.served_model_name) {
        return RequestError{404,
                            fmt::format("The model `{}` does not exist (this server serves `{}`).",
                                        model, limits.served_model_name),
                            "NotFoundError", "model"};
    }
    ParsedRequest out;
    if (limits.defaults) out.sampling = *limits.defaults;
    bool max_given = false;
    std::optional<RequestError> e = chat ? read_chat_prompt(j, limits, tok, out.prompts)
                                         : read_completion_prompts(j, tok, out.prompts);
    if (!e) e = read_max_tokens(j, chat, limits.max_model_len, out.sampling, max_given);
    if (!e) e = read_sampling_scalars(j, out.sampling, out.priority);
    if (!e) e = read_stops(j, out.sampling);
    if (!e) e = read_logit_bias(j, out.sampling);
    if (!e) e = read_logprobs(j, chat, out);
    if (!e) e = read_stream_options(j, out);
    if (!e) e = read_resume(j, out);
    if (e) return *e;
    if (Status st = out.sampling.validate(int(limits.vocab_size)); !st.ok()) {
        return bad(st.error().message, "");
    }
    if (auto pe = check_prompts(out, chat, max_given, limits)) return *pe;
    if (auto fe = check_request_fields(j, chat)) return *fe;
    if (auto se = read_constraint(j, chat, limits, out)) return *se;
    if (auto re = check_resume_grammar(out, tok)) return *re;
    return out;
}

}  // namespace pagoda::server
