#pragma once
// Chat prompts from OpenAI `messages`: the model's tokenizer.chat_template rendered by the
// in-house Jinja subset (server/jinja.h) with messages, bos_token, eos_token and
// add_generation_prompt. A template outside the subset falls back (with a warning) to a
// built-in equivalent recognised by family (ChatML/Qwen, Llama 3, Llama 2/Mistral [INST],
// Phi-3, Gemma); a model without a template gets the documented default
// ("System: ...\nUser: ...\nAssistant: ...\nAssistant:", BOS added by the tokenizer).

#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"
#include "tokenizer/vocab.h"

namespace pagoda::server {

struct RenderedChat {
    std::string text;
    bool add_bos = false;  // the tokenizer should add BOS (the template text does not hold it)
    std::string
        family;  // jinja, or the built-in: chatml, llama3, llama2, mistral, phi3, gemma, default
};

// Validates the messages (role and content types; content as a string or a list of
// {"type": "text", "text": ...} parts) and renders them, ending with the assistant's turn.
Result<RenderedChat> render_chat(const nlohmann::json& messages, const tokenizer::Vocab& vocab,
                                 bool add_generation_prompt);

}  // namespace pagoda::server
