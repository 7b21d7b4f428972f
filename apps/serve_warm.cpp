#include "apps/serve_warm.h"

#include <CLI/CLI.hpp>

#include "control/rule_expr.h"

namespace pagoda::app {

void add_warm_flags(CLI::App* c, WarmFlags& f) {
    const char* g = "Warmup";
    c->add_option("--warmup", f.warmup,
                  "Before /ready: minimal (kernels, engine rounds, API paths), full (also faults "
                  "in the whole KV pool) or off")
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
}

Status apply_warm_flags(const WarmFlags& f, control::ControlOptions& o) {
    o.warm_dynamic = f.dynamic;
    PAGODA_ASSIGN_OR_RETURN(o.warm.thresholds, control::parse_thresholds(f.thresholds));
    PAGODA_ASSIGN_OR_RETURN(o.warm.spin_ms, control::parse_spins(f.spin_ms));
    o.warm.seconds_per_request = f.seconds_per_request;
    auto w = control::parse_duration_ms(f.max_window);
    if (!w.ok()) return Error{w.error().code, "--warm-max-window: " + w.error().message};
    o.warm.max_window_s = double(*w) / 1000.0;
    if (Status st = o.warm.validate(); !st.ok()) return st;
    return ok_status();
}

}  // namespace pagoda::app
