#pragma once
// Subcommand registration for the pagoda CLI. Each add_* declares its flags and, when
// its subcommand is chosen, sets `action` to the function that runs it.

#include <functional>

namespace CLI {
class App;
}

namespace pagoda::app {

void add_generate(CLI::App& app, std::function<int()>& action);
void add_tokenize(CLI::App& app, std::function<int()>& action);
void add_model(CLI::App& app, std::function<int()>& action);
void add_serve(CLI::App& app, std::function<int()>& action);
void add_bench(CLI::App& app, std::function<int()>& action);
void add_config(CLI::App& app, std::function<int()>& action);
void add_sim(CLI::App& app, std::function<int()>& action);
void add_tune(CLI::App& app, std::function<int()>& action);
// `pagoda rules ...` and `pagoda audit`.
void add_rules(CLI::App& app, std::function<int()>& action);
// `pagoda forecast import|backtest|show`.
void add_forecast(CLI::App& app, std::function<int()>& action);
// `pagoda router`.
void add_router(CLI::App& app, std::function<int()>& action);
// `pagoda fleet up|down|status|switch|canary|pause|resume|promote|abort|render`.
void add_fleet(CLI::App& app, std::function<int()>& action);
// `pagoda rehearse`: a production day, three arms, on the virtual-clock fleet.
void add_rehearse(CLI::App& app, std::function<int()>& action);
void add_check(CLI::App& app, std::function<int()>& action);
// `pagoda bench trace-stats`, under the `bench` subcommand.
void add_trace_stats(CLI::App* bench_cmd, std::function<int()>& action);
// `pagoda model render-chat`, under the `model` subcommand.
void add_render_chat(CLI::App* model_cmd, std::function<int()>& action);
// `pagoda sim predict`, under the `sim` subcommand.
void add_sim_predict(CLI::App* sim_cmd, std::function<int()>& action);
// `pagoda sim loaded`, under the `sim` subcommand (cmd_rehearse.cpp).
void add_sim_loaded(CLI::App* sim_cmd, std::function<int()>& action);

}  // namespace pagoda::app
