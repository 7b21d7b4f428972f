#include "apps/chat_flags.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace pagoda::app {

void add_chat_flags(CLI::App* c, ChatFlags& f, bool serving) {
    c->add_option("--chat-template", f.chat_template,
                  "Jinja chat template file used instead of the model's tokenizer.chat_template")
        ->check(CLI::ExistingFile);
    if (serving) {
        c->add_flag("--trust-request-chat-template", f.trust_request_template,
                    "Let requests bring their own 'chat_template' (off: such requests get a 400)");
        c->add_option("--tool-call-parser", f.tool_call_parser,
                      "How tool calls are read from the model's output with tool_choice \"auto\": "
                      "llama3_json, hermes (also Qwen) or mistral (default: detected from the "
                      "chat template's markers)")
            ->check(CLI::IsMember({"llama3_json", "hermes", "mistral"}));
        c->add_flag("--enable-auto-tool-choice", f.enable_auto_tool_choice,
                    "Accepted for vLLM compatibility: tool_choice \"auto\" is always available");
    }
    c->add_option("--chat-template-date", f.date,
                  "The local time strftime_now() sees, YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS "
                  "(default: the clock); for tests and reproducible prompts");
}

namespace {

Result<std::time_t> parse_local_time(const std::string& s) {
    std::tm tm{};
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
    char tail = 0;
    const int n =
        std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &sec, &tail);
    const bool ok = (n == 3 && s.size() == 10) || n == 5 || n == 6;
    if (!ok || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--chat-template-date '{}' is not YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS", s);
    }
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    tm.tm_isdst = -1;
    return std::mktime(&tm);
}

}  // namespace

Result<server::ChatTemplateOptions> chat_options(const ChatFlags& f) {
    server::ChatTemplateOptions o;
    o.trust_request_template = f.trust_request_template;
    if (!f.chat_template.empty()) {
        std::ifstream in(f.chat_template, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        if (!in.good() && !in.eof()) {
            return make_error(ErrorCode::kNotFound, "--chat-template {}: cannot read the file",
                              f.chat_template);
        }
        o.template_text = ss.str();
        if (o.template_text.empty()) {
            return make_error(ErrorCode::kInvalidArgument, "--chat-template {} is empty",
                              f.chat_template);
        }
        o.template_source = f.chat_template;
    }
    if (!f.date.empty()) {
        PAGODA_ASSIGN_OR_RETURN(std::time_t t, parse_local_time(f.date));
        o.now = t;
    }
    return o;
}

}  // namespace pagoda::app
