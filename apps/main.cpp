// pagoda: the command-line entry point. Parses flags into config structs and runs one
// subcommand; all work lives in the libraries.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "apps/commands.h"
#include "base/log.h"

namespace {

// libgomp reads GOMP_SPINCOUNT once, when it is loaded (before main). Its default lets an
// idle worker spin ~300k iterations (a few ms) before sleeping: two processes sharing the
// CPUs then spin through each other's time slices (two servers on 2 vCPUs: 16 streams
// not done after 30 s; 20000 iterations still did that). Sleeping almost at once
// (libgomp's choice when it sees more threads than CPUs) puts a futex sleep and wake-up,
// a hypervisor exit in a VM, between the ~115 parallel regions of a forward pass.
// 2000 iterations keeps the worker awake across the short serial gaps of a step and
// yields the CPU soon after. Measured on 2 vCPUs, TinyLlama-shape q8_0, alternating
// runs: decode 42 -> 48 tok/s, a one-token request sent back to back 41 -> 36 ms, and
// the end-to-end tests under `ctest -j2` as fast as before. Set only when the operator
// set neither this nor OMP_WAIT_POLICY; the process re-executes itself once so that
// libgomp sees it.
void set_openmp_spin(char** argv) {
    if (std::getenv("GOMP_SPINCOUNT") != nullptr || std::getenv("OMP_WAIT_POLICY") != nullptr)
        return;
    if (setenv("GOMP_SPINCOUNT", "2000", 1) != 0) return;
    execv("/proc/self/exe", argv);  // returns only on failure: run on with libgomp's default
    unsetenv("GOMP_SPINCOUNT");
}

}  // namespace

int main(int argc, char** argv) {
    set_openmp_spin(argv);
    CLI::App app{"Pagoda: an LLM inference engine and serving system (GGUF models on CPU)"};
    app.set_version_flag("--version", std::string("pagoda ") + PAGODA_VERSION);
    app.require_subcommand(1);
    std::function<int()> action;
    std::string log_level;
    app.add_option("--log-level", log_level,
                   "Log detail on stderr: debug, info, warn, error (default: warn for generate, "
                   "info for serve)")
        ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
    std::string log_format = "text";
    app.add_option("--log-format", log_format,
                   "Log lines on stderr: text (`HH:MM:SS level event key=value`) or json (one "
                   "object a line, for log collectors); also PAGODA_LOG_FORMAT")
        ->check(CLI::IsMember({"text", "json"}));
    // --log-level and --log-format also after the subcommand (pagoda serve --log-format json).
    app.fallthrough();
    pagoda::app::add_generate(app, action);
    pagoda::app::add_tokenize(app, action);
    pagoda::app::add_model(app, action);
    pagoda::app::add_serve(app, action);
    pagoda::app::add_bench(app, action);
    pagoda::app::add_config(app, action);
    pagoda::app::add_sim(app, action);
    pagoda::app::add_tune(app, action);
    pagoda::app::add_rules(app, action);
    pagoda::app::add_forecast(app, action);
    pagoda::app::add_router(app, action);
    pagoda::app::add_fleet(app, action);
    pagoda::app::add_rehearse(app, action);
    pagoda::app::add_check(app, action);
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
    const char* env_format = std::getenv("PAGODA_LOG_FORMAT");
    if (log_format == "json" || (app.count("--log-format") == 0 && env_format != nullptr &&
                                 std::string_view(env_format) == "json")) {
        pagoda::set_log_format(pagoda::LogFormat::kJson);
    }
    if (!log_level.empty()) {
        pagoda::set_log_level(log_level == "debug"  ? pagoda::LogLevel::kDebug
                              : log_level == "info" ? pagoda::LogLevel::kInfo
                              : log_level == "warn" ? pagoda::LogLevel::kWarn
                                                    : pagoda::LogLevel::kError);
    } else {
        pagoda::set_log_level(app.got_subcommand("serve") || app.got_subcommand("router") ||
                                      app.got_subcommand("fleet")
                                  ? pagoda::LogLevel::kInfo
                                  : pagoda::LogLevel::kWarn);
    }
    return action ? action() : 0;
}
