#pragma once
// Chat prompts from OpenAI `messages`. Until the in-house Jinja subset lands, the model's
// tokenizer.chat_template is recognised by family (ChatML/Qwen, Llama 3, Llama 2/Mistral
// [INST], Phi-3, Gemma) and rendered by a built-in equivalent; a model without a template
// gets the documented default ("System: ...\nUser: ...\nAssistant: ...\nAssistant:").

#include <nlohmann/json.hpp>

#include <string>

#include "base/result.h"
#include "tokenizer/vocab.h"

namespace pagoda::server {

struct RenderedChat {
    std::string text;
    bool add_bos = false;  // the tokenizer should add BOS (the template text does not hold it)
    std::string family;    // chatml, llama3, llama2, mistral, phi3, gemma, default
};

// Validates the messages (role and content types; content as a string or a list of
// {"type": "text", "text": ...} parts) and renders them, ending with the assistant's turn.
Result<RenderedChat> render_chat(const nlohmann::json& messages, const tokenizer::Vocab& vocab, bool add_generation_prompt);

}  // namespace pagoda::server
