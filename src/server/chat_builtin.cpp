// Built-in chat renderers, for GGUF files that carry no chat template at all (the family is
// chosen from the vocabulary's special tokens by chat_template.cpp), and the documented
// default ("System: ...\nUser: ...\nAssistant:", BOS added by the tokenizer).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "server/chat_template.h"

namespace pagoda::server {

namespace {

struct Message {
    std::string role, content;
};

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

// [INST]: the system prompt goes before the first user message.
std::string render_inst(const std::vector<Message>& msgs) {
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
            content = system + "\n\n" + content;
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

}  // namespace

Result<RenderedChat> render_builtin(const std::string& family,
                                    const nlohmann::ordered_json& messages,
                                    bool add_generation_prompt) {
    std::vector<Message> msgs;
    for (const auto& m : messages) {
        std::string role = m.value("role", "user");
        if (role == "developer") role = "system";
        const auto c = m.find("content");
        msgs.push_back({role, c != m.end() && c->is_string() ? c->get<std::string>() : ""});
    }
    RenderedChat r;
    r.family = family;
    std::string& s = r.text;
    if (family == "chatml") {
        for (const auto& m : msgs)
            s += fmt::format("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.content);
        if (add_generation_prompt) s += "<|im_start|>assistant\n";
    } else if (family == "llama3") {
        s = "<|begin_of_text|>";
        for (const auto& m : msgs)
            s += fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n{}<|eot_id|>", m.role,
                             m.content);
        if (add_generation_prompt) s += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    } else if (family == "phi3") {
        for (const auto& m : msgs) s += fmt::format("<|{}|>\n{}<|end|>\n", m.role, m.content);
        if (add_generation_prompt) s += "<|assistant|>\n";
    } else if (family == "gemma") {
        s = render_gemma(msgs, add_generation_prompt);
    } else if (family == "inst") {
        s = render_inst(msgs);
    } else {
        r.add_bos = true;
        s = render_default(msgs, add_generation_prompt);
    }
    return r;
}

}  // namespace pagoda::server
