// The implementation of server/chat_template.h (the contract is there).
#include "server/chat_template.h"

#include <fmt/format.h>

#include "base/log.h"
#include "template/jinja.h"

namespace pagoda::server {

using ojson = nlohmann::ordered_json;

struct ChatTemplate::Compiled {
    jinja::Template tmpl;
};

namespace {

const char* const kRoles[] = {"system", "developer", "user",    "assistant",
                              "tool",   "ipython",   "function"};

// content: a string, null, or text parts (joined with newlines, as vLLM's "string" format).
std::optional<ChatInputError> read_content(ojson& m, size_t i) {
    auto c = m.find("content");
    if (c == m.end() || c->is_null() || c->is_string()) return std::nullopt;
    if (!c->is_array()) {
        return ChatInputError{
            fmt::format("messages[{}].content must be a string or a list of text parts", i),
            "messages"};
    }
    std::string text;
    for (size_t k = 0; k < c->size(); ++k) {
        const auto& part = (*c)[k];
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string()) {
            return ChatInputError{
                fmt::format("messages[{}].content[{}] must be {{\"type\": "
                            "\"text\", \"text\": ...}} (this model reads text only)",
                            i, k),
                "messages"};
        }
        text += (k ? "\n" : "") + part["text"].get<std::string>();
    }
    *c = text;
    return std::nullopt;
}

// An assistant's tool_calls: arguments arrive as JSON text (OpenAI) and templates expect a
// dict (arguments | tojson, arguments.items()), so they are parsed, as vLLM does.
std::optional<ChatInputError> read_tool_calls(ojson& m, size_t i) {
    auto tc = m.find("tool_calls");
    if (tc == m.end() || tc->is_null()) return std::nullopt;
    if (!tc->is_array()) {
        return ChatInputError{fmt::format("messages[{}].tool_calls must be a list", i), "messages"};
    }
    for (auto& call : *tc) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
            return ChatInputError{
                fmt::format("messages[{}].tool_calls entries must be {{\"type\": \"function\", "
                            "\"function\": {{\"name\": ..., \"arguments\": ...}}}}",
                            i),
                "messages"};
        }
        auto& args = call["function"]["arguments"];
        if (args.is_string()) {
            ojson parsed = ojson::parse(args.get<std::string>(), nullptr, false);
            if (!parsed.is_discarded()) args = std::move(parsed);
        }
    }
    return std::nullopt;
}

std::optional<ChatInputError> read_messages(const ojson& body, ojson& out) {
    auto it = body.find("messages");
    if (it == body.end()) return ChatInputError{"'messages' is required", "messages"};
    if (!it->is_array() || it->empty()) {
        return ChatInputError{"'messages' must be a non-empty list of {role, content} objects",
                              "messages"};
    }
    out = *it;
    for (size_t i = 0; i < out.size(); ++i) {
        ojson& m = out[i];
        if (!m.is_object())
            return ChatInputError{fmt::format("messages[{}] must be an object", i), "messages"};
        auto role = m.find("role");
        if (role == m.end() || !role->is_string()) {
            return ChatInputError{fmt::format("messages[{}].role must be a string", i), "messages"};
        }
        const std::string r = role->get<std::string>();
        if (std::find(std::begin(kRoles), std::end(kRoles), r) == std::end(kRoles)) {
            return ChatInputError{
                fmt::format("messages[{}].role '{}' is not one of system, developer, user, "
                            "assistant, tool, ipython, function",
                            i, r),
                "messages"};
        }
        if (auto e = read_content(m, i)) return e;
        if (auto e = read_tool_calls(m, i)) return e;
    }
    return std::nullopt;
}

}  // namespace

std::variant<ChatInput, ChatInputError> read_chat_input(const ojson& body) {
    ChatInput in;
    if (auto e = read_messages(body, in.messages)) return *e;
    auto field = [&](const char* name) { return body.contains(name) && !body[name].is_null(); };
    for (const char* name : {"tools", "documents"}) {
        if (!field(name)) continue;
        if (!body[name].is_array())
            return ChatInputError{fmt::format("'{}' must be a list of objects", name), name};
        (std::string(name) == "tools" ? in.tools : in.documents) = body[name];
    }
    for (const char* name : {"add_generation_prompt", "continue_final_message"}) {
        if (!field(name)) continue;
        if (!body[name].is_boolean())
            return ChatInputError{fmt::format("'{}' must be a boolean", name), name};
        (std::string(name) == "add_generation_prompt" ? in.add_generation_prompt
                                                      : in.continue_final_message) =
            body[name].get<bool>();
    }
    if (in.add_generation_prompt && in.continue_final_message && field("add_generation_prompt")) {
        return ChatInputError{
            "'continue_final_message' and 'add_generation_prompt' cannot both "
            "be true (set add_generation_prompt to false to continue the last "
            "message)",
            "continue_final_message"};
    }
    if (in.continue_final_message) in.add_generation_prompt = false;
    if (field("chat_template_kwargs")) {
        if (!body["chat_template_kwargs"].is_object())
            return ChatInputError{"'chat_template_kwargs' must be an object",
                                  "chat_template_kwargs"};
        in.kwargs = body["chat_template_kwargs"];
        for (const char* reserved : {"messages", "tools", "documents", "add_generation_prompt"}) {
            if (in.kwargs.contains(reserved)) {
                return ChatInputError{
                    fmt::format("'chat_template_kwargs' cannot set '{}' (it is a request field "
                                "of its own)",
                                reserved),
                    "chat_template_kwargs"};
            }
        }
    }
    if (field("chat_template")) {
        if (!body["chat_template"].is_string())
            return ChatInputError{"'chat_template' must be a string", "chat_template"};
        in.chat_template = body["chat_template"].get<std::string>();
    }
    return in;
}

namespace {

std::string token_text(const tokenizer::Vocab& v, tokenizer::TokenId id) {
    return id >= 0 && size_t(id) < v.tokens.size() ? v.tokens[size_t(id)] : std::string();
}

// A built-in renderer for a GGUF without a template, by the vocabulary's special tokens.
std::string builtin_family(const tokenizer::Vocab& v) {
    auto has = [&](const char* t) { return v.token_to_id.count(t) > 0; };
    if (has("<|im_start|>") && has("<|im_end|>")) return "chatml";
    if (has("<|start_header_id|>") && has("<|eot_id|>")) return "llama3";
    if (has("<|assistant|>") && has("<|end|>")) return "phi3";
    if (has("<start_of_turn>") && has("<end_of_turn>")) return "gemma";
    if (has("[INST]") && has("[/INST]")) return "inst";
    return "default";
}

}  // namespace

Result<RenderedChat> render_builtin(const std::string& family, const ChatInput& in);

ChatTemplate::ChatTemplate(const tokenizer::Vocab& vocab, ChatTemplateOptions opts)
    : opts_(std::move(opts)) {
    special_ = ojson::object();
    special_["bos_token"] = token_text(vocab, vocab.bos);
    special_["eos_token"] = token_text(vocab, vocab.eos);
    if (vocab.unk >= 0) special_["unk_token"] = token_text(vocab, vocab.unk);
    if (vocab.pad >= 0) special_["pad_token"] = token_text(vocab, vocab.pad);
    const bool from_file = !opts_.template_text.empty();
    const std::string& text = from_file ? opts_.template_text : vocab.chat_template;
    const std::string where = from_file ? fmt::format("--chat-template {}", opts_.template_source)
                                        : "the model's template";
    source_ = text;
    if (text.empty()) {
        builtin_ = builtin_family(vocab);
        // The tool-call markers of the built-in families' models.
        source_ = builtin_ == "chatml" ? "<tool_call>" : builtin_ == "inst" ? "[TOOL_CALLS]" : "";
        description_ =
            fmt::format("built-in '{}' renderer (the model carries no chat template)", builtin_);
        return;
    }
    auto t = jinja::Template::parse(text);
    if (!t.ok()) {
        load_error_ = fmt::format(
            "{} does not parse: {}. Chat requests are refused until it is fixed or replaced "
            "(--chat-template FILE); completions are served.",
            where, t.error().message);
        description_ = where + " (unusable)";
        return;
    }
    compiled_ = std::make_shared<Compiled>(Compiled{std::move(t).value()});
    description_ = where;
}

std::shared_ptr<const ChatTemplate> ChatTemplate::create(const tokenizer::Vocab& vocab,
                                                         ChatTemplateOptions opts) {
    return std::make_shared<const ChatTemplate>(vocab, std::move(opts));
}

Result<std::shared_ptr<const ChatTemplate::Compiled>> ChatTemplate::per_request(
    const std::string& text) const {
    if (!opts_.trust_request_template) {
        return make_error(ErrorCode::kInvalidArgument,
                          "'chat_template' in a request is refused: this server does not run "
                          "templates from clients (start it with --trust-request-chat-template)");
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = request_cache_.find(text);
    if (it != request_cache_.end()) return it->second;
    auto t = jinja::Template::parse(text);
    if (!t.ok()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "the request's chat_template does not parse: {}", t.error().message);
    }
    if (request_cache_.size() >= 16) request_cache_.erase(request_cache_.begin());
    auto c = std::make_shared<const Compiled>(Compiled{std::move(t).value()});
    request_cache_.emplace(text, c);
    return c;
}

Result<std::string> ChatTemplate::render_jinja(const Compiled& t, const ChatInput& in) const {
    ojson ctx = special_;
    for (const auto& [k, v] : in.kwargs.items()) ctx[k] = v;
    ctx["messages"] = in.messages;
    ctx["tools"] = in.tools;
    ctx["documents"] = in.documents;
    ctx["add_generation_prompt"] = in.add_generation_prompt;
    auto text = t.tmpl.render(ctx, {.now = opts_.now});
    if (!text.ok()) return text.error();
    if (!in.continue_final_message) return text;
    // As transformers: the prompt ends where the final message's text ends.
    const ojson& last = in.messages.back();
    const auto content = last.find("content");
    const std::string final_text =
        content != last.end() && content->is_string() ? content->get<std::string>() : "";
    std::string& s = *text;
    size_t at = final_text.empty() ? std::string::npos : s.rfind(final_text);
    size_t len = final_text.size();
    if (at == std::string::npos) {
        const size_t b = final_text.find_first_not_of(" \t\n\r");
        const size_t e = final_text.find_last_not_of(" \t\n\r");
        const std::string stripped = b == std::string::npos ? "" : final_text.substr(b, e - b + 1);
        at = stripped.empty() ? std::string::npos : s.rfind(stripped);
        len = stripped.size();
    }
    if (at == std::string::npos) {
        return make_error(ErrorCode::kInvalidArgument,
                          "continue_final_message is set but the final message's content does not "
                          "appear in the rendered prompt (the template drops or rewrites it)");
    }
    s.resize(at + len);
    return text;
}

Result<RenderedChat> ChatTemplate::render(const ChatInput& in) const {
    std::shared_ptr<const Compiled> t = compiled_;
    if (in.chat_template) {
        PAGODA_ASSIGN_OR_RETURN(t, per_request(*in.chat_template));
    } else if (!load_error_.empty()) {
        return make_error(ErrorCode::kInvalidArgument, "{}", load_error_);
    }
    if (t == nullptr) return render_builtin(builtin_, in);
    PAGODA_ASSIGN_OR_RETURN(std::string text, render_jinja(*t, in));
    return RenderedChat{std::move(text), false, "jinja"};
}

}  // namespace pagoda::server
