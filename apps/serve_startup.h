#pragma once
// `pagoda serve`'s startup warmup (--warmup minimal|full), run before /ready: the engine
// warmup (kernels and step rounds) and real API requests through the handler in process.
// Used only by cmd_serve.cpp.

#include <string>

#include "engine/engine.h"
#include "model/model.h"
#include "server/openai_server.h"

namespace pagoda::app {

// Creates the matmul primitives of every batch bucket and, with `rounds_too` (--warmup
// full), runs prompts and concurrent decodes through the engine until the round time
// settles; returns a description for the log.
std::string warmup(engine::Engine& eng, model::Model& m, bool rounds_too);
// Sends completions and chat requests (plain and streamed) through `api`; returns how many
// answered.
int warm_api(server::OpenAiServer& api);

}  // namespace pagoda::app
