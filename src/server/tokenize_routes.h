#pragma once
// POST /tokenize and /detokenize, as vLLM serves them: text or chat messages to token ids
// (with count and max_model_len), ids back to text. Thread-safe (the tokenizer is immutable).

#include "engine/engine.h"
#include "http/server.h"

namespace pagoda::server {

class ChatTemplate;

// /tokenize: a prompt, or chat messages rendered with the server's chat template.
http::Reply tokenize(const http::Request& req, const engine::Engine& engine,
                     const ChatTemplate& chat);
http::Reply detokenize(const http::Request& req, const engine::Engine& engine);

}  // namespace pagoda::server
