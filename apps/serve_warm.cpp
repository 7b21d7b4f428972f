#include "apps/serve_warm.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <ctime>

#include "control/alerting/rule_expr.h"

namespace pagoda::app {

namespace {

void add_forecast_flags(CLI::App* c, WarmFlags& f) {
    const char* g = "Forecast (predictive warmup)";
    c->add_flag("--forecast,!--no-forecast", f.forecast,
                "Record the request rate per minute in the state directory, forecast the next "
                "30 minutes (seasonal naive, Holt-Winters, LSTM; the best on a rolling backtest) "
                "and pre-warm ahead of a predicted rise (GET /admin/forecast)")
        ->group(g);
    c->add_option("--prewarm-lead", f.lead_minutes,
                  "Minutes ahead of a predicted rise that the pre-warm starts (low, then medium "
                  "at two thirds, high at one third of the lead)")
        ->capture_default_str()
        ->group(g);
    c->add_option("--prewarm-rise", f.rise,
                  "A predicted rate this many times the current one (or 5% of the history's "
                  "peak, if higher) is a rise")
        ->capture_default_str()
        ->group(g);
    c->add_option("--replica-capacity-rps", f.capacity_rps,
                  "Requests/s one replica serves within its SLOs, for "
                  "pagoda_forecast_recommended_replicas (0: the busiest minute of the history "
                  "whose queue stayed shallow)")
        ->capture_default_str()
        ->group(g);
    c->add_option("--forecast-refit", f.refit, "How often the backtest and retraining run")
        ->capture_default_str()
        ->group(g);
    c->add_option("--forecast-clock-scale", f.clock_scale,
                  "Run the forecast clock this many times faster than real time (for replaying "
                  "a day-long trace in minutes with pagoda bench --speed; use a fresh "
                  "--state-dir)")
        ->capture_default_str()
        ->group(g);
    c->add_option("--forecast-clock-start", f.clock_start,
                  "The forecast clock's time at start: unix seconds or 2026-11-30T06:00:00Z "
                  "(default: now)")
        ->group(g);
}

// Unix seconds, or an ISO 8601 UTC time (YYYY-MM-DDTHH:MM[:SS][Z]); in milliseconds.
Result<int64_t> parse_clock_start(const std::string& s) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0' && v > 0) return int64_t(v * 1000);
    std::tm tm{};
    const char* rest = strptime(s.c_str(), "%Y-%m-%dT%H:%M", &tm);
    if (rest != nullptr && *rest == ':') rest = strptime(rest, ":%S", &tm);
    if (rest == nullptr || !(*rest == '\0' || (rest[0] == 'Z' && rest[1] == '\0'))) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--forecast-clock-start: '{}' is neither unix seconds nor a UTC time "
                          "like 2026-11-30T06:00:00Z",
                          s);
    }
    return int64_t(timegm(&tm)) * 1000;
}

}  // namespace

void add_warm_flags(CLI::App* c, WarmFlags& f) {
    const char* g = "Warmup";
    c->add_option("--warmup", f.warmup,
                  "Before /ready: minimal (matmul primitives, then API requests through the "
                  "engine), full (also engine rounds until the step time settles, and the whole "
                  "KV pool faulted in) or off")
        ->capture_default_str()
        ->check(CLI::IsMember({"minimal", "full", "off"}))
        ->group(g);
    c->add_flag("--dynamic-warmup,!--no-dynamic-warmup", f.dynamic,
                "Raise the warm level when the waiting queue passes --warm-thresholds (on by "
                "default; POST /admin/warmup sets a level by hand either way)")
        ->group(g);
    c->add_option("--warm-thresholds", f.thresholds,
                  "Waiting requests above which the warm level is low, medium, high")
        ->capture_default_str()
        ->group(g);
    c->add_option("--warm-seconds-per-request", f.seconds_per_request,
                  "A level lasts this many seconds per waiting request (up to --warm-max-window)")
        ->capture_default_str()
        ->group(g);
    c->add_option("--warm-max-window", f.max_window, "The longest a warm level lasts")
        ->capture_default_str()
        ->group(g);
    c->add_option("--warm-spin-ms", f.spin_ms,
                  "How long the compute pool keeps spinning after it runs out of work, per level "
                  "off,low,medium,high (ms; -1: the level's whole window). Spinning keeps the "
                  "CPUs awake so the next request pays no wake-up; off costs nothing idle")
        ->capture_default_str()
        ->group(g);
    c->add_option("--warm-pass-ms", f.pass_ms,
                  "Interval of warm passes while the pool spins, per level off,low,medium,high "
                  "(ms; 0: none). A warm pass is a small forward pass of the engine's own, "
                  "abandoned at the next layer when a request comes; it keeps the weights warm "
                  "in the host's caches, which spinning alone does not")
        ->capture_default_str()
        ->group(g);
    add_forecast_flags(c, f);
}

Status apply_warm_flags(const WarmFlags& f, control::ControlOptions& o) {
    o.warm_dynamic = f.dynamic;
    PAGODA_ASSIGN_OR_RETURN(o.warm.thresholds, control::parse_thresholds(f.thresholds));
    PAGODA_ASSIGN_OR_RETURN(o.warm.spin_ms, control::parse_spins(f.spin_ms));
    PAGODA_ASSIGN_OR_RETURN(o.warm.pass_ms, control::parse_passes(f.pass_ms));
    o.warm.seconds_per_request = f.seconds_per_request;
    auto w = control::parse_duration_ms(f.max_window);
    if (!w.ok()) return Error{w.error().code, "--warm-max-window: " + w.error().message};
    o.warm.max_window_s = double(*w) / 1000.0;
    if (Status st = o.warm.validate(); !st.ok()) return st;
    control::ForecastOptions& fo = o.forecast;
    fo.enabled = f.forecast;
    fo.clock_scale = f.clock_scale;
    fo.lead_minutes = f.lead_minutes;
    fo.rise_factor = f.rise;
    fo.replica_capacity_rps = f.capacity_rps;
    if (!f.clock_start.empty()) {
        PAGODA_ASSIGN_OR_RETURN(fo.clock_start_ms, parse_clock_start(f.clock_start));
    }
    auto r = control::parse_duration_ms(f.refit);
    if (!r.ok() || *r < 60'000) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--forecast-refit: '{}' must be a duration of at least 1m", f.refit);
    }
    fo.refit_minutes = int(*r / 60'000);
    return fo.validate();
}

}  // namespace pagoda::app
