// The implementation of server/tokenize_routes.h (the contract is there).
#include "server/tokenize_routes.h"

#include <fmt/core.h>

#include "server/api_error.h"
#include "server/chat_template.h"
#include "server/request.h"
#include "tokenizer/detokenizer.h"

namespace pagoda::server {

http::Reply tokenize(const http::Request& req, const engine::Engine& engine,
                     const ChatTemplate& chat) {
    http::Response err;
    auto j = parse_body(req, err);
    if (!j) return reply(err);
    const auto& tok = engine.model().tokenizer();
    bool add_special = true;
    if (auto e = read(*j, "add_special_tokens", add_special, "a boolean")) {
        return bad_request(e->message, e->param);
    }
    std::string text;
    if (j->contains("messages")) {
        auto in = read_chat_input(nlohmann::ordered_json::parse(req.body, nullptr, false));
        if (auto* e = std::get_if<ChatInputError>(&in)) return bad_request(e->message, e->param);
        auto rendered = chat.render(std::get<ChatInput>(in));
        if (!rendered.ok()) return bad_request(rendered.error().message, "messages");
        text = rendered->text;
        add_special = rendered->add_bos;
    } else if (auto e = read(*j, "prompt", text, "a string")) {
        return bad_request(e->message, e->param);
    } else if (!j->contains("prompt")) {
        return bad_request("'prompt' (a string) or 'messages' is required", "prompt");
    }
    const auto ids =
        tok.encode(text, {add_special ? tokenizer::AddSpecial::kYes : tokenizer::AddSpecial::kNo,
                          tokenizer::ParseSpecial::kYes});
    return reply(json_response(200, json{{"count", ids.size()},
                                         {"max_model_len", engine.config().sched.max_model_len},
                                         {"tokens", ids}}));
}

http::Reply detokenize(const http::Request& req, const engine::Engine& engine) {
    http::Response err;
    auto j = parse_body(req, err);
    if (!j) return reply(err);
    auto it = j->find("tokens");
    if (it == j->end() || !it->is_array()) {
        return bad_request("'tokens' (a list of token ids) is required", "tokens");
    }
    std::vector<int32_t> ids;
    const int64_t vocab = engine.model().config().vocab_size;
    for (const auto& t : *it) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab) {
            return bad_request(fmt::format("'tokens' must hold token ids in [0, {})", vocab),
                               "tokens");
        }
        ids.push_back(t.get<int32_t>());
    }
    const std::string text = engine.model().tokenizer().decode(ids);
    return reply(json_response(200, json{{"prompt", tokenizer::sanitize_utf8(text)}}));
}

}  // namespace pagoda::server
