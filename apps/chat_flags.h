#pragma once
// The chat template flags shared by `pagoda serve` and `pagoda model render-chat`:
// --chat-template FILE (vLLM's flag), --trust-request-chat-template and
// --chat-template-date (fixes strftime_now, for tests and reproducible prompts).

#include <CLI/CLI.hpp>
#include <string>

#include "base/result.h"
#include "server/chat_template.h"

namespace pagoda::app {

struct ChatFlags {
    std::string chat_template;  // a file; empty: the model's template
    bool trust_request_template = false;
    std::string date;                      // YYYY-MM-DD[THH:MM[:SS]], local time; empty: the clock
    std::string tool_call_parser;          // serve: llama3_json | hermes | mistral; empty: detect
    bool enable_auto_tool_choice = false;  // vLLM's flag, accepted: auto tool choice is always on
};

void add_chat_flags(CLI::App* c, ChatFlags& f, bool serving);
// Reads the template file and the date.
Result<server::ChatTemplateOptions> chat_options(const ChatFlags& f);

}  // namespace pagoda::app
