#pragma once
// POST /tokenize and /detokenize, as vLLM serves them: text or chat messages to token ids
// (with count and max_model_len), ids back to text. Thread-safe (the tokenizer is immutable).

#include "engine/engine.h"
#include "http/server.h"

namespace pagoda::server {

http::Reply tokenize(const http::Request& req, const engine::Engine& engine);
http::Reply detokenize(const http::Request& req, const engine::Engine& engine);

}  // namespace pagoda::server
