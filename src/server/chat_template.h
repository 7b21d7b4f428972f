#pragma once
// Chat prompts from OpenAI `messages`, rendered as transformers' apply_chat_template renders
// them: the model's tokenizer.chat_template (or --chat-template FILE) through the Jinja
// engine (template/jinja.h) with messages, tools, documents, add_generation_prompt, the
// special tokens (bos_token, eos_token, ...) and the request's chat_template_kwargs.
//
// No guessing: a template that does not parse is kept as a load-time error (logged at
// start, returned on every chat request). Only a GGUF without any template gets a built-in
// renderer, chosen from the vocabulary's special tokens (ChatML, Llama 3, Phi-3, Gemma,
// [INST]) or the documented default ("System: ...\nUser: ...\nAssistant:"), and the log
// says which.

#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>

#include "base/result.h"
#include "tokenizer/vocab.h"

namespace pagoda::server {

struct ChatTemplateOptions {
    std::string template_text;            // --chat-template's contents; empty: the model's own
    std::string template_source;          // where template_text came from (a path), for messages
    bool trust_request_template = false;  // --trust-request-chat-template
    std::optional<std::time_t> now;       // strftime_now's time (--chat-template-date)
};

// The chat fields of a request (vLLM's names).
struct ChatInput {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    nlohmann::ordered_json tools;      // null when absent, as transformers passes it
    nlohmann::ordered_json documents;  // null when absent
    nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
    bool add_generation_prompt = true;
    bool continue_final_message = false;
    std::optional<std::string> chat_template;  // per request (needs the trust flag)
};
struct ChatInputError {
    std::string message, param;
};
// Reads and checks the chat fields of a /v1/chat/completions (or /tokenize) body.
std::variant<ChatInput, ChatInputError> read_chat_input(const nlohmann::ordered_json& body);

struct RenderedChat {
    std::string text;
    bool add_bos = false;  // the tokenizer should add BOS (the text does not hold it)
    std::string family;    // jinja, or the built-in: chatml, llama3, phi3, gemma, inst, default
};

class ChatTemplate {
  public:
    static std::shared_ptr<const ChatTemplate> create(const tokenizer::Vocab& vocab,
                                                      ChatTemplateOptions opts);
    // Why the template cannot be used (it does not parse); empty when it can.
    const std::string& load_error() const { return load_error_; }
    // What renders chats, for the log: the model's template, a file, or a built-in.
    const std::string& description() const { return description_; }
    // The template's text, or for a built-in renderer its family's markers (what tool-call
    // parsing is chosen from).
    const std::string& source() const { return source_; }
    // No template: a built-in renderer (chat_builtin.cpp) renders chats.
    bool built_in() const { return compiled_ == nullptr && load_error_.empty(); }

    Result<RenderedChat> render(const ChatInput& in) const;

    struct Compiled;
    ChatTemplate(const tokenizer::Vocab& vocab, ChatTemplateOptions opts);

  private:
    Result<std::string> render_jinja(const Compiled& t, const ChatInput& in) const;
    Result<std::shared_ptr<const Compiled>> per_request(const std::string& text) const;

    ChatTemplateOptions opts_;
    nlohmann::ordered_json special_;  // bos_token, eos_token, ... as the template sees them
    std::shared_ptr<const Compiled> compiled_;  // null: no template (built-in) or load error
    std::string load_error_, description_, builtin_, source_;
    mutable std::mutex mu_;  // per-request templates, parsed once each (a few kept)
    mutable std::map<std::string, std::shared_ptr<const Compiled>> request_cache_;
};

}  // namespace pagoda::server
