// `pagoda model render-chat`: the prompt a chat request becomes (the model's template, or
// --chat-template FILE) and its tokens, so an operator sees what the model receives.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "apps/chat_flags.h"
#include "apps/cli_common.h"
#include "apps/commands.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::app {
namespace {

using ojson = nlohmann::ordered_json;

struct RenderChatFlags {
    std::string model = default_model_path();
    std::string messages, tools, kwargs;
    bool no_generation_prompt = false, continue_final = false;
    std::string format = "text";
    ChatFlags chat;
};

Result<ojson> read_json_file(const std::string& path, const char* flag) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(ErrorCode::kNotFound, "{} {}: cannot open the file", flag, path);
    std::stringstream ss;
    ss << in.rdbuf();
    ojson j = ojson::parse(ss.str(), nullptr, false);
    if (j.is_discarded())
        return make_error(ErrorCode::kInvalidArgument, "{} {}: not valid JSON", flag, path);
    return j;
}

// The request body the flags describe: --messages is a list of messages or a whole chat
// request ({"messages": ..., "tools": ..., "chat_template_kwargs": ...}).
Result<ojson> request_body(const RenderChatFlags& f) {
    PAGODA_ASSIGN_OR_RETURN(ojson m, read_json_file(f.messages, "--messages"));
    ojson body = m.is_object() ? m : ojson{{"messages", m}};
    if (!f.tools.empty()) {
        PAGODA_ASSIGN_OR_RETURN(body["tools"], read_json_file(f.tools, "--tools"));
    }
    if (!f.kwargs.empty()) {
        ojson k = ojson::parse(f.kwargs, nullptr, false);
        if (!k.is_object()) {
            return make_error(ErrorCode::kInvalidArgument,
                              "--chat-template-kwargs must be a JSON object, e.g. "
                              "'{{\"enable_thinking\": false}}'");
        }
        body["chat_template_kwargs"] = k;
    }
    if (f.no_generation_prompt) body["add_generation_prompt"] = false;
    if (f.continue_final) {
        body["continue_final_message"] = true;
        body["add_generation_prompt"] = false;
    }
    return body;
}

int run_render_chat(const RenderChatFlags& f) {
    auto g = model::open_gguf(f.model);
    if (!g.ok()) return fail(g.error());
    auto tok = tokenizer::Tokenizer::from_gguf(*g->gguf);
    if (!tok.ok()) return fail(tok.error());
    auto opts = chat_options(f.chat);
    if (!opts.ok()) return fail(opts.error());
    auto tmpl = server::ChatTemplate::create(tok->vocab(), std::move(opts).value());
    auto body = request_body(f);
    if (!body.ok()) return fail(body.error());
    auto in = server::read_chat_input(*body);
    if (auto* e = std::get_if<server::ChatInputError>(&in)) {
        return fail(make_error(ErrorCode::kInvalidArgument, "{}", e->message));
    }
    auto r = tmpl->render(std::get<server::ChatInput>(in));
    if (!r.ok()) return fail(r.error());
    const auto ids =
        tok->encode(r->text, {r->add_bos ? tokenizer::AddSpecial::kYes : tokenizer::AddSpecial::kNo,
                              tokenizer::ParseSpecial::kYes});
    if (f.format == "json") {
        ojson pieces = ojson::array();
        for (auto id : ids) pieces.push_back(tok->vocab().tokens[size_t(id)]);
        const ojson out = {{"prompt", r->text},
                           {"renderer", tmpl->description()},
                           {"tokens", ids},
                           {"pieces", pieces}};
        std::printf("%s\n", out.dump(2, ' ', false, ojson::error_handler_t::replace).c_str());
        return 0;
    }
    std::fwrite(r->text.data(), 1, r->text.size(), stdout);
    std::fprintf(stderr, "\n--- %s; %zu tokens:", tmpl->description().c_str(), ids.size());
    for (auto id : ids) std::fprintf(stderr, " %d", id);
    std::fprintf(stderr, "\n");
    return 0;
}

}  // namespace

void add_render_chat(CLI::App* model_cmd, std::function<int()>& action) {
    auto f = std::make_shared<RenderChatFlags>();
    CLI::App* c = model_cmd->add_subcommand(
        "render-chat", "Print the prompt a chat request becomes (and its tokens on stderr)");
    c->add_option("-m,--model", f->model, "GGUF model file (its tokenizer and chat template)")
        ->capture_default_str()
        ->check(CLI::ExistingFile);
    c->add_option("--messages", f->messages,
                  "JSON file: a list of messages, or a whole chat request body")
        ->required()
        ->check(CLI::ExistingFile);
    c->add_option("--tools", f->tools, "JSON file: the request's 'tools' list")
        ->check(CLI::ExistingFile);
    c->add_option("--chat-template-kwargs", f->kwargs,
                  "JSON object of extra template variables, e.g. '{\"enable_thinking\": false}'");
    c->add_flag("--no-generation-prompt", f->no_generation_prompt,
                "Render without the assistant's opening (add_generation_prompt false)");
    c->add_flag("--continue-final-message", f->continue_final,
                "End the prompt inside the last message (vLLM's continue_final_message)");
    c->add_option("--format", f->format,
                  "text: the prompt on stdout, tokens on stderr; json: prompt, tokens, pieces")
        ->capture_default_str()
        ->check(CLI::IsMember({"text", "json"}));
    add_chat_flags(c, f->chat, false);
    c->callback([f, &action] { action = [f] { return run_render_chat(*f); }; });
}

}  // namespace pagoda::app
