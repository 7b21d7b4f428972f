// pagoda: the command-line entry point. Parses flags into config structs and runs one
// subcommand; all work lives in the libraries.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "apps/commands.h"
#include "base/log.h"

int main(int argc, char** argv) {
    CLI::App app{"Pagoda: an LLM inference engine and serving system (GGUF models on CPU)"};
    app.set_version_flag("--version", std::string("pagoda ") + PAGODA_VERSION);
    app.require_subcommand(1);
    std::function<int()> action;
    std::string log_level;
    app.add_option("--log-level", log_level,
                   "Log detail on stderr: debug, info, warn, error (default: warn for generate, info for serve)")
        ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
    pagoda::app::add_generate(app, action);
    pagoda::app::add_tokenize(app, action);
    pagoda::app::add_model(app, action);
    pagoda::app::add_serve(app, action);
    pagoda::app::add_bench(app, action);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "error: %s (see --help)\n", e.what());
        return 2;
    }
    if (!log_level.empty()) {
        pagoda::set_log_level(log_level == "debug"  ? pagoda::LogLevel::kDebug
                              : log_level == "info" ? pagoda::LogLevel::kInfo
                              : log_level == "warn" ? pagoda::LogLevel::kWarn
                                                    : pagoda::LogLevel::kError);
    } else {
        pagoda::set_log_level(app.got_subcommand("serve") ? pagoda::LogLevel::kInfo : pagoda::LogLevel::kWarn);
    }
    return action ? action() : 0;
}
