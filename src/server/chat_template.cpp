#include "server/chat_template.h"

#include <fmt/format.h>

#include <map>
#include <mutex>

#include "base/log.h"
#include "server/jinja.h"

namespace pagoda::server {

namespace {

struct Message {
    std::string role, content;
};

Result<std::vector<Message>> parse_messages(const nlohmann::json& messages) {
    if (!messages.is_array() || messages.empty()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "'messages' must be a non-empty list of {{role, content}} objects");
    }
    std::vector<Message> out;
    for (size_t i = 0; i < messages.size(); ++i) {
        const auto& m = messages[i];
        if (!m.is_object())
            return make_error(ErrorCode::kInvalidArgument, "messages[{}] must be an object", i);
        auto role = m.find("role");
        if (role == m.end() || !role->is_string()) {
            return make_error(ErrorCode::kInvalidArgument, "messages[{}].role must be a string", i);
        }
        const std::string r = role->get<std::string>();
        if (r != "system" && r != "user" && r != "assistant" && r != "developer" && r != "tool") {
            return make_error(
                ErrorCode::kInvalidArgument,
                "messages[{}].role '{}' is not one of system, developer, user, assistant, tool", i,
                r);
        }
        std::string content;
        auto c = m.find("content");
        if (c == m.end() || c->is_null()) {
            content = "";
        } else if (c->is_string()) {
            content = c->get<std::string>();
        } else if (c->is_array()) {
            for (const auto& part : *c) {
                if (!part.is_object() || part.value("type", "") != "text" ||
                    !part.contains("text") || !part["text"].is_string()) {
                    return make_error(ErrorCode::kInvalidArgument,
                                      "messages[{}].content parts must be {{\"type\": \"text\", "
                                      "\"text\": ...}} (text only)",
                                      i);
                }
                content += part["text"].get<std::string>();
            }
        } else {
            return make_error(ErrorCode::kInvalidArgument,
                              "messages[{}].content must be a string or a list of text parts", i);
        }
        out.push_back({r == "developer" ? "system" : r, std::move(content)});
    }
    return out;
}

// The model's template, parsed once per template text (nullptr when outside the subset).
std::shared_ptr<const jinja::Template> compiled(const std::string& text) {
    static std::mutex mu;
    static std::map<std::string, std::shared_ptr<const jinja::Template>> cache;
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(text);
    if (it != cache.end()) return it->second;
    auto t = jinja::Template::parse(text);
    std::shared_ptr<const jinja::Template> p;
    if (t.ok()) {
        p = std::make_shared<const jinja::Template>(std::move(t).value());
    } else {
        log_warn("chat_template_fallback renderer=builtin reason=\"{}\"", t.error().message);
    }
    cache.emplace(text, p);
    return p;
}

std::string token_text(const tokenizer::Vocab& v, tokenizer::TokenId id) {
    return id >= 0 && size_t(id) < v.tokens.size() ? v.tokens[size_t(id)] : std::string();
}

Result<RenderedChat> render_builtin(const std::vector<Message>& msgs, const tokenizer::Vocab& vocab,
                                    bool add_generation_prompt);

}  // namespace

Result<RenderedChat> render_chat(const nlohmann::json& messages, const tokenizer::Vocab& vocab,
                                 bool add_generation_prompt) {
    PAGODA_ASSIGN_OR_RETURN(std::vector<Message> msgs, parse_messages(messages));
    const std::string& t = vocab.chat_template;
    if (!t.empty()) {
        if (auto tmpl = compiled(t)) {
            nlohmann::json ms = nlohmann::json::array();
            for (const auto& m : msgs) ms.push_back({{"role", m.role}, {"content", m.content}});
            const nlohmann::json ctx = {{"messages", ms},
                                        {"bos_token", token_text(vocab, vocab.bos)},
                                        {"eos_token", token_text(vocab, vocab.eos)},
                                        {"add_generation_prompt", add_generation_prompt}};
            auto text = tmpl->render(ctx);
            if (!text.ok()) return text.error();
            RenderedChat r;
            r.text = std::move(text).value();
            r.family = "jinja";
            return r;
        }
    }
    return render_builtin(msgs, vocab, add_generation_prompt);
}

namespace {

std::string render_gemma(const std::vector<Message>& msgs, bool add_generation_prompt) {
    std::string s = "<bos>";
    std::string system;
    for (const auto& m : msgs) {
        if (m.role == "system") {
            system += m.content + "\n\n";
            continue;
        }
        const std::string role = m.role == "assistant" ? "model" : "user";
        s += fmt::format("<start_of_turn>{}\n{}{}<end_of_turn>\n", role,
                         role == "user" ? system : "", m.content);
        if (role == "user") system.clear();
    }
    if (add_generation_prompt) s += "<start_of_turn>model\n";
    return s;
}

// [INST] families: Llama 2 puts the system prompt in <<SYS>>, Mistral before the first user
// message.
std::string render_inst(const std::vector<Message>& msgs, bool llama2) {
    std::string s, system;
    for (const auto& m : msgs) {
        if (m.role == "system") {
            system += m.content;
            continue;
        }
        if (m.role != "user") {
            s += fmt::format(" {}</s>", m.content);
            continue;
        }
        std::string content = m.content;
        if (!system.empty()) {
            content = llama2 ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content
                             : system + "\n\n" + content;
            system.clear();
        }
        s += fmt::format("<s>[INST] {} [/INST]", content);
    }
    return s;
}

std::string render_default(const std::vector<Message>& msgs, bool add_generation_prompt) {
    std::string s;
    for (const auto& m : msgs) {
        const char* who = m.role == "system"      ? "System"
                          : m.role == "user"      ? "User"
                          : m.role == "assistant" ? "Assistant"
                                                  : "Tool";
        s += fmt::format("{}: {}\n", who, m.content);
    }
    if (add_generation_prompt) s += "Assistant:";
    return s;
}

// Built-in equivalents by template family, for templates outside the Jinja subset, and
// the documented default for models without a template.
Result<RenderedChat> render_builtin(const std::vector<Message>& msgs, const tokenizer::Vocab& vocab,
                                    bool add_generation_prompt) {
    const std::string& t = vocab.chat_template;
    auto has = [&](const char* marker) { return t.find(marker) != std::string::npos; };
    RenderedChat r;
    std::string& s = r.text;
    if (has("<|im_start|>")) {
        r.family = "chatml";
        for (const auto& m : msgs)
            s += fmt::format("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.content);
        if (add_generation_prompt) s += "<|im_start|>assistant\n";
    } else if (has("<|start_header_id|>")) {
        r.family = "llama3";
        s = "<|begin_of_text|>";
        for (const auto& m : msgs)
            s += fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n{}<|eot_id|>", m.role,
                             m.content);
        if (add_generation_prompt) s += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    } else if (has("<|assistant|>") && has("<|end|>")) {
        r.family = "phi3";
        for (const auto& m : msgs) s += fmt::format("<|{}|>\n{}<|end|>\n", m.role, m.content);
        if (add_generation_prompt) s += "<|assistant|>\n";
    } else if (has("<start_of_turn>")) {
        r.family = "gemma";
        s = render_gemma(msgs, add_generation_prompt);
    } else if (has("[INST]")) {
        r.family = has("<<SYS>>") ? "llama2" : "mistral";
        s = render_inst(msgs, has("<<SYS>>"));
    } else {
        r.family = "default";
        r.add_bos = true;
        s = render_default(msgs, add_generation_prompt);
    }
    return r;
}

}  // namespace

}  // namespace pagoda::server
