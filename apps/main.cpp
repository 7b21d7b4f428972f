// pagoda: the command-line entry point. Parses flags into config structs and runs one
// subcommand; all work lives in the libraries.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "apps/commands.h"

int main(int argc, char** argv) {
    CLI::App app{"Pagoda: an LLM inference engine and serving system (GGUF models on CPU)"};
    app.set_version_flag("--version", std::string("pagoda ") + PAGODA_VERSION);
    app.require_subcommand(1);
    std::function<int()> action;
    pagoda::app::add_generate(app, action);
    pagoda::app::add_tokenize(app, action);
    pagoda::app::add_model(app, action);
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
    return action ? action() : 0;
}
