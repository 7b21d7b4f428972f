// `pagoda forecast import|backtest|show`: the predictive warmup tier's request-rate history
// from a trace (seed a new replica's state directory from a gateway log, or a generated
// day/night trace), the forecasters' backtest on a trace, and a running server's forecast.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "apps/cli_common.h"
#include "apps/commands.h"
#include "control/config/state_db.h"
#include "control/forecast/forecast_tier.h"

namespace pagoda::app {
namespace {

struct ForecastFlags {
    std::string trace;
    std::string state_dir;
    double until_s = 0;  // only arrivals before this trace time (unix seconds); 0: all
    int horizon = 30;
    int folds = 12;
    int step = 120;
    bool json = false;
    AdminTarget target;
};

// Arrivals per minute of a JSONL trace ("timestamp" in seconds or "timestamp_ms"), minutes
// at or after `until_s` left out. Errors name the file and line.
Result<std::map<int64_t, int64_t>> minute_counts(const std::string& path, double until_s) {
    std::ifstream in(path);
    if (!in) return make_error(ErrorCode::kNotFound, "cannot open trace file '{}'", path);
    std::map<int64_t, int64_t> counts;
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
        ++lineno;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        auto j = nlohmann::json::parse(line, nullptr, false);
        double ts = NAN;
        if (j.is_object() && j.contains("timestamp") && j["timestamp"].is_number()) {
            ts = j["timestamp"].get<double>();
        } else if (j.is_object() && j.contains("timestamp_ms") && j["timestamp_ms"].is_number()) {
            ts = j["timestamp_ms"].get<double>() / 1000;
        }
        if (!std::isfinite(ts) || ts < 0) {
            return make_error(ErrorCode::kInvalidFile,
                              "{}:{}: needs \"timestamp\" (unix seconds) or \"timestamp_ms\" as a "
                              "non-negative number",
                              path, lineno);
        }
        if (until_s > 0 && ts >= until_s) continue;
        counts[int64_t(ts / 60)] += 1;
    }
    if (counts.empty()) return make_error(ErrorCode::kInvalidFile, "{}: no requests", path);
    return counts;
}

// Contiguous requests/s per minute from the first counted minute to the last.
control::RateSeries to_series(const std::map<int64_t, int64_t>& counts) {
    const int64_t first = counts.begin()->first, last = counts.rbegin()->first;
    control::RateSeries s(size_t(last - first + 1), 0.0);
    for (const auto& [m, n] : counts) s[size_t(m - first)] = double(n) / 60.0;
    return s;
}

int run_import(const ForecastFlags& f) {
    auto counts = minute_counts(f.trace, f.until_s);
    if (!counts.ok()) return fail(counts.error());
    auto db =
        control::StateDb::open(f.state_dir.empty() ? control::default_state_dir() : f.state_dir);
    if (!db.ok()) return fail(db.error());
    std::vector<control::RateMinute> rows;
    int64_t total = 0;
    const int64_t first = counts->begin()->first, last = counts->rbegin()->first;
    for (int64_t m = first; m <= last; ++m) {
        auto it = counts->find(m);
        const int64_t n = it == counts->end() ? 0 : it->second;
        rows.push_back({m, n, 0, 0, 0});
        total += n;
    }
    if (Status st = (*db)->put_rate_minutes(rows); !st.ok()) return fail(st.error());
    std::printf("imported %zu minutes (%lld requests) into %s, from minute %lld to %lld\n",
                rows.size(), (long long)total, (*db)->path().c_str(), (long long)first,
                (long long)last);
    return 0;
}

int run_backtest(const ForecastFlags& f) {
    auto counts = minute_counts(f.trace, f.until_s);
    if (!counts.ok()) return fail(counts.error());
    const control::RateSeries s = to_series(*counts);
    control::ForecastOptions o;
    o.horizon = f.horizon;
    o.backtest_folds = f.folds;
    o.backtest_step = f.step;
    const control::FitResult r = control::fit_models(s, o);
    nlohmann::json models = nlohmann::json::array();
    for (const auto& b : r.ranking) {
        models.push_back({{"model", b.name},
                          {"mae_rps", b.windows > 0 ? nlohmann::json(b.mae) : nlohmann::json()},
                          {"windows", b.windows},
                          {"error", b.error}});
    }
    const bool any = !r.ranking.empty() && r.ranking.front().windows > 0;
    if (f.json) {
        const nlohmann::json j = {
            {"minutes", s.size()},
            {"horizon_minutes", f.horizon},
            {"folds", f.folds},
            {"step_minutes", f.step},
            {"chosen", any ? nlohmann::json(r.ranking.front().name) : nullptr},
            {"lstm_loss", {{"first", r.lstm.first_loss}, {"last", r.lstm.last_loss}}},
            {"seconds", r.seconds},
            {"models", models}};
        std::printf("%s\n", j.dump(2).c_str());
        return any ? 0 : 1;
    }
    std::printf(
        "%zu minutes of history; %d-minute forecasts from %d origins %d minutes apart "
        "(%.1f s)\n",
        s.size(), f.horizon, f.folds, f.step, r.seconds);
    std::printf("  %-22s %12s %8s\n", "model", "MAE req/s", "windows");
    for (const auto& b : r.ranking) {
        if (b.windows > 0) {
            std::printf("  %-22s %12.5f %8d  %s\n", b.name.c_str(), b.mae, b.windows,
                        b.error.c_str());
        } else {
            std::printf("  %-22s %12s %8d  %s\n", b.name.c_str(), "-", 0, b.error.c_str());
        }
    }
    std::printf("chosen: %s\n", any ? r.ranking.front().name.c_str() : "none (too little history)");
    return any ? 0 : 1;
}

void trace_flags(CLI::App* c, ForecastFlags& f) {
    c->add_option("trace", f.trace, "A JSONL trace (timestamp in unix seconds, or timestamp_ms)")
        ->required()
        ->check(CLI::ExistingFile);
    c->add_option("--until", f.until_s,
                  "Only arrivals before this unix time (for example where a replay will start)");
}

}  // namespace

void add_forecast(CLI::App& app, std::function<int()>& action) {
    auto f = std::make_shared<ForecastFlags>();
    CLI::App* c = app.add_subcommand(
        "forecast", "Request-rate forecasting: import history, backtest the forecasters");
    c->require_subcommand(1);
    CLI::App* im = c->add_subcommand(
        "import", "Add a trace's arrivals per minute to the state directory's rate history");
    trace_flags(im, *f);
    im->add_option("--state-dir", f->state_dir,
                   "The state directory (default $XDG_STATE_HOME/pagoda, else "
                   "~/.local/state/pagoda)");
    im->callback([f, &action] { action = [f] { return run_import(*f); }; });
    CLI::App* bt = c->add_subcommand(
        "backtest", "Rolling backtest of every forecaster on a trace: error per model, choice");
    trace_flags(bt, *f);
    bt->add_option("--horizon", f->horizon, "Minutes forecast from each origin")
        ->capture_default_str()
        ->check(CLI::Range(1, 1440));
    bt->add_option("--folds", f->folds, "Backtest origins")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    bt->add_option("--step", f->step, "Minutes between origins")
        ->capture_default_str()
        ->check(CLI::Range(1, 10080));
    bt->add_flag("--json", f->json, "Print JSON");
    bt->callback([f, &action] { action = [f] { return run_backtest(*f); }; });
    CLI::App* show = c->add_subcommand("show", "A running server's forecast (GET /admin/forecast)");
    show->add_option("--url", f->target.url, "Base URL of the pagoda server")
        ->capture_default_str();
    show->add_option("--admin-api-key", f->target.admin_key,
                     "Admin key (default: PAGODA_ADMIN_API_KEY; none on loopback)");
    show->callback([f, &action] {
        action = [f] { return admin_request(f->target, "GET", "/admin/forecast", ""); };
    });
}

}  // namespace pagoda::app
