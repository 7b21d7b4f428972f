// Built-in chat renderers, for GGUF files that carry no chat template at all (the family is
// chosen from the vocabulary's special tokens by chat_template.cpp), and the documented
// default ("System: ...\nUser: ...\nAssistant:", BOS added by the tokenizer).
//
// The chat fields a template would render have one generic form here (docs/api.md), never
// dropped: `tools` and `documents` become a system message before the others ("You can call
// these tools ..." with each tool's function as one JSON line; "Documents:" with "[i] title:
// text" per document), an assistant message's `tool_calls` its content followed by the calls
// as a JSON list of {"name", "parameters"}; `chat_template_kwargs` only mean something to a
// Jinja template and are refused with a 400 that names --chat-template.
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

// The generic system text for tools and documents ("" when there are neither).
std::string tools_and_documents(const ChatInput& in) {
    std::string s;
    if (in.tools.is_array() && !in.tools.empty()) {
        s += "You can call these tools. To call one, answer with JSON {\"name\": NAME, "
             "\"parameters\": {...}}:\n";
        for (const auto& t : in.tools)
            s += (t.contains("function") ? t["function"] : t).dump() + "\n";
    }
    if (in.documents.is_array() && !in.documents.empty()) {
        s += "Documents:\n";
        int i = 1;
        for (const auto& d : in.documents) {
            const bool obj = d.is_object();
            const std::string title = obj ? d.value("title", std::string()) : std::string();
            const std::string text = obj && d.contains("text") && d["text"].is_string()
                                         ? d["text"].get<std::string>()
                                     : d.is_string() ? d.get<std::string>()
                                                     : d.dump();
            s += fmt::format("[{}] {}{}\n", i++, title.empty() ? "" : title + ": ", text);
        }
    }
    if (!s.empty()) s.pop_back();
    return s;
}

// A message's text: its content, and for an assistant's tool calls the calls as JSON.
std::string message_text(const nlohmann::ordered_json& m) {
    const auto c = m.find("content");
    std::string text = c != m.end() && c->is_string() ? c->get<std::string>() : "";
    const auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array() || calls->empty()) return text;
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& call : *calls) {
        const auto& f = call.contains("function") ? call["function"] : call;
        nlohmann::ordered_json args = f.value("arguments", nlohmann::ordered_json::object());
        if (args.is_string()) {
            auto parsed = nlohmann::ordered_json::parse(args.get<std::string>(), nullptr, false);
            if (!parsed.is_discarded()) args = parsed;
        }
        list.push_back({{"name", f.value("name", "")}, {"parameters", args}});
    }
    return text + (text.empty() ? "" : "\n") + list.dump();
}

}  // namespace

Result<RenderedChat> render_builtin(const std::string& family, const ChatInput& in) {
    if (in.kwargs.is_object() && !in.kwargs.empty()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "chat_template_kwargs ({}) need a Jinja chat template: this model has "
                          "none and its built-in '{}' renderer takes no arguments; give one "
                          "with --chat-template FILE",
                          in.kwargs.dump(), family);
    }
    std::vector<Message> msgs;
    if (std::string extra = tools_and_documents(in); !extra.empty()) {
        msgs.push_back({"system", std::move(extra)});
    }
    for (const auto& m : in.messages) {
        std::string role = m.value("role", "user");
        if (role == "developer") role = "system";
        msgs.push_back({role, message_text(m)});
    }
    const bool add_generation_prompt = in.add_generation_prompt;
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
