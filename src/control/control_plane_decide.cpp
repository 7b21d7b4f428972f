// ControlPlane: the block-size decision, the OOM guard's tick, reports and metrics.
#include <fmt/core.h>

#include <cmath>
#include <limits>

#include "base/log.h"
#include "control/control_plane.h"
#include "metrics/metrics.h"

namespace pagoda::control {

namespace {

json distribution(const LengthHistogram& h, double ema) {
    return {{"count", h.count()},     {"mean", h.mean()},        {"p50", h.quantile(0.5)},
            {"p90", h.quantile(0.9)}, {"p99", h.quantile(0.99)}, {"ema", ema}};
}

double cost_of(const MeasuredDecision& md, int block) {
    for (const Candidate& c : md.candidates) {
        if (c.block_size == block) return c.cost;
    }
    return 0;
}

}  // namespace

MeasuredInputs ControlPlane::measured_inputs() const {
    MeasuredInputs in;
    in.kv_memory_bytes = cm_->current().value.layout.kv_cache_memory_bytes;
    const int64_t slots = engine_.num_kv_blocks() * engine_.kv_block_size();
    in.kv_bytes_per_token = slots > 0 ? int64_t(engine_.kv_cache_bytes()) / slots : 0;
    in.concurrency = std::max<int64_t>(peak_running_, 1);
    in.kv_pressure = peak_kv_usage_;
    in.current_block = engine_.kv_block_size();
    return in;
}

// The decode rate since the last decision and the prefill rate so far, from the engine's
// published counters, and what re-laying out now would cost against what it would save.
bool ControlPlane::worth_relayout(const MeasuredDecision& md, int current, int choice,
                                  int64_t now_ms, json& d, std::string& reason) {
    const double cc = cost_of(md, current), cn = cost_of(md, choice);
    if (!(cc > 0 && cn > 0)) return true;  // no calibration to weigh it with
    const auto st = engine_.stats();
    const double since_s = double(now_ms - gen_seen_ms_) / 1000.0;
    const double decode_rate = gen_tokens_seen_ >= 0 && since_s > 0
                                   ? double(st->generation_tokens - gen_tokens_seen_) / since_s
                                   : 0.0;
    const double prefill_s = st->total_time.forward_s - st->decode_steps_s;
    const double prefill_rate = prefill_s > 0 ? double(st->prompt_tokens) / prefill_s : 0.0;
    const RelayoutEconomics e =
        relayout_economics(cc, cn, decode_rate, double(o_.cooldown_ms) / 1000.0,
                           st->blocks.filled_slots, prefill_rate);
    d["economics"] = e.to_json();
    if (e.net_s() > 0 || (e.cost_s == 0 && e.saving_s >= 0)) return true;
    retry_decision_ms_ = now_ms + std::min<int64_t>(60'000, o_.decide_every_ms);
    reason += fmt::format(
        "; deferred: re-laying out now costs {} (the KV of {} tokens in {} running sequences to "
        "copy) against {:.2f} s saved over the {} s cooldown; decided again in {} s, waiting "
        "for a quieter moment",
        std::isfinite(e.cost_s) ? fmt::format("{:.2f} s", e.cost_s)
                                : std::string("an unknown time"),
        e.tokens, st->queue.running, e.saving_s, o_.cooldown_ms / 1000,
        (retry_decision_ms_ - now_ms) / 1000);
    return false;
}

json ControlPlane::decide_locked(int64_t now_ms) {
    last_decision_ms_ = now_ms;
    retry_decision_ms_ = 0;
    const int current = cm_->current().value.layout.block_size;
    std::string window;
    const LengthHistogram& w = stats_.window_for(now_ms, o_.min_samples, &window);
    json d = {{"at_ms", now_ms},
              {"policy", block_size_policy_name(o_.policy)},
              {"window", window},
              {"current_block_size", current},
              {"distribution", distribution(w, stats_.ema())}};
    int choice = current;
    bool act = false;
    std::string reason;
    if (w.count() < o_.min_samples) {
        reason = fmt::format("{} finished requests in the window; a decision needs {}", w.count(),
                             o_.min_samples);
    } else {
        MeasuredDecision md;
        if (cal_) {
            const MeasuredInputs in = measured_inputs();
            md = measured_decide(w, *cal_, in);
            d["measured"] = md.to_json();
            d["measured"]["concurrency"] = in.concurrency;
            d["measured"]["kv_pressure"] = in.kv_pressure;
        }
        if (o_.policy == BlockSizePolicy::kSeed) {
            SeedParams p = o_.seed;
            p.scaling = seed_scaling_;
            const SeedDecision sd = seed_decide(w, stats_.ema(), stats_.all().mean(), p);
            d["seed"] = sd.to_json();
            d["seed"]["scaling"] = p.scaling;
            choice = sd.block;
            act = choice != current;
            const double cc = cost_of(md, current), cn = cost_of(md, choice);
            d["gain"] = cc > 0 && cn > 0 ? (cc - cn) / cc : 0.0;
            reason = fmt::format("seed predicts {:.0f} tokens: block {} (raw {})", sd.predicted,
                                 sd.block, sd.raw);
        } else {
            choice = md.block;
            d["gain"] = md.gain;
            act = choice != current && md.gain >= o_.min_gain;
            reason = md.reason;
            if (choice != current && !act) {
                reason += fmt::format("; predicted gain {:.1f}% is under the {:.1f}% threshold",
                                      md.gain * 100, o_.min_gain * 100);
            }
        }
        const int64_t cool_left = last_policy_change_ms_ + o_.cooldown_ms - now_ms;
        if (act && last_policy_change_ms_ > 0 && cool_left > 0) {
            act = false;
            reason += fmt::format("; in cooldown for {} s more", cool_left / 1000);
        }
        if (act && cal_) act = worth_relayout(md, current, choice, now_ms, d, reason);
    }
    {
        const auto st = engine_.stats();
        gen_tokens_seen_ = st->generation_tokens;
        gen_seen_ms_ = now_ms;
    }
    d["choice"] = choice;
    std::string action = "kept";
    if (act && automation_ == Automation::kPaused) {
        action = "paused";
    } else if (act && automation_ == Automation::kDryRun) {
        action = "dry_run";
    } else if (act) {
        ChangeRequest r;
        r.patch = {{"block_size", choice}};
        r.source = "policy:block_size";
        r.reason = reason;
        auto v = cm_->change(r);
        action = v.ok() ? "changed" : "refused";
        if (v.ok()) {
            d["version"] = v->id;
            last_policy_change_ms_ = now_ms;
        } else {
            d["error"] = v.error().message;
        }
    }
    d["action"] = action;
    d["reason"] = reason;
    log_info("block_size_decision policy={} current={} choice={} action={} reason=\"{}\"",
             block_size_policy_name(o_.policy), current, choice, action, reason);
    peak_running_ = 0;
    peak_kv_usage_ = 0;
    ++decisions_[action];
    record("block_size_decision", d, now_ms);
    last_decision_ = d;
    return d;
}

void ControlPlane::guard_tick(int64_t now_ms) {
    const auto st = engine_.stats();
    GuardSample s;
    s.at_ms = now_ms;
    s.free_blocks = st->blocks.free;
    s.total_blocks = st->blocks.total;
    s.waiting = st->queue.waiting;
    s.pressure_preemptions = st->preemptions - st->relayout_evictions;
    s.rss_bytes = read_rss_bytes();
    signals_ = guard_.observe(s);
    const int64_t failures = cm_->allocation_failures();
    if (failures > allocation_failures_seen_) {
        signals_.push_back(OomGuard::allocation_failure(fmt::format(
            "{} change(s) refused since the last tick", failures - allocation_failures_seen_)));
        allocation_failures_seen_ = failures;
    }
    std::vector<std::string> names;
    for (const GuardSignal& g : signals_) names.push_back(g.name);
    const bool changed = names != last_signal_names_;
    last_signal_names_ = names;
    if (signals_.empty()) return;
    cm_->note_risk(now_ms);
    json sig = json::array();
    std::string text;
    for (const GuardSignal& g : signals_) {
        ++signal_counts_[g.name];
        sig.push_back(g.to_json());
        text += (text.empty() ? "" : "; ") + g.text;
    }
    const ConfigVersion cur = cm_->current();
    auto stable = cm_->last_stable();
    // Never against the guard's own rollback: it returned to the last stable value.
    const bool differs =
        stable.ok() && *stable && !((*stable)->value == cur.value) && cur.source != "oom_guard";
    const GuardAction a = guard_action(true, now_ms, cur.created_at_ms, differs, o_.guard);
    json detail = {{"signals", sig}, {"version", cur.id}, {"action", guard_action_name(a)}};
    if (a == GuardAction::kRollback && automation_ == Automation::kOn) {
        detail["target"] = (*stable)->id;
        auto v = cm_->guard_rollback((*stable)->id, "OOM guard: " + text, detail, now_ms);
        if (v.ok()) {
            ++guard_rollbacks_;
            log_warn("oom_guard_rollback from={} to={} signals=\"{}\"", cur.id, (*stable)->id,
                     text);
        } else {
            detail["error"] = v.error().message;
            log_warn("oom_guard_rollback_failed error=\"{}\"", v.error().message);
            record("oom_rollback", detail, now_ms);
        }
    } else if (changed) {
        if (a == GuardAction::kRollback) detail["automation"] = automation_name(automation_);
        log_warn("oom_risk version={} action={} automation={} signals=\"{}\"", cur.id,
                 guard_action_name(a), automation_name(automation_), text);
        record("oom_signal", detail, now_ms);
    }
}

json ControlPlane::block_size_report() const {
    std::lock_guard<std::mutex> lock(mu_);
    json r = {{"policy", block_size_policy_name(o_.policy)},
              {"block_size", engine_.kv_block_size()},
              {"automation", automation_name(automation_)},
              {"decide_every_s", o_.decide_every_ms / 1000},
              {"min_gain", o_.min_gain},
              {"cooldown_s", o_.cooldown_ms / 1000},
              {"min_samples", o_.min_samples},
              {"lengths", distribution(stats_.all(), stats_.ema())},
              {"last_decision", last_decision_}};
    if (o_.policy != BlockSizePolicy::kStatic) {
        r["next_decision_in_s"] =
            std::max<int64_t>(0, last_decision_ms_ + o_.decide_every_ms - unix_ms_now()) / 1000;
    }
    if (cal_) r["calibration"] = cal_->to_json();
    return r;
}

json ControlPlane::guard_report() const {
    std::lock_guard<std::mutex> lock(mu_);
    json sig = json::array();
    for (const GuardSignal& g : signals_) sig.push_back(g.to_json());
    const GuardOptions& g = o_.guard;
    return {{"signals", sig},
            {"automation", automation_name(automation_)},
            {"rollbacks", guard_rollbacks_},
            {"thresholds",
             {{"free_blocks_fraction", g.free_blocks_fraction},
              {"preemptions_per_minute", g.preemptions_per_minute},
              {"rss_fraction", g.rss_fraction},
              {"memory_limit_bytes", g.memory_limit_bytes},
              {"window_s", g.window_ms / 1000}}}};
}

Automation ControlPlane::automation() const {
    std::lock_guard<std::mutex> lock(mu_);
    return automation_;
}

Status ControlPlane::set_automation(Automation a, const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = unix_ms_now();
    record("automation",
           {{"from", automation_name(automation_)}, {"to", automation_name(a)}, {"reason", reason}},
           now);
    log_info("automation from={} to={} reason=\"{}\"", automation_name(automation_),
             automation_name(a), reason);
    automation_ = a;
    return ok_status();
}

Result<std::vector<json>> ControlPlane::events(const std::string& kind, int limit) {
    return cm_->with_db([&](StateDb& db) { return db.events(kind, limit); });
}

std::string ControlPlane::metrics_text(const std::string& model_name) const {
    std::string out = cm_->metrics_text(model_name);
    std::lock_guard<std::mutex> lock(mu_);
    out += warm_metrics(model_name);
    if (forecast_) out += forecast_->metrics_text(model_name);
    metrics::TextWriter w;
    const metrics::Labels model = {{"model_name", model_name}};
    w.family("pagoda_context_length_ema_tokens", "gauge",
             "Moving average of finished requests' context length (prompt + output).");
    w.sample("pagoda_context_length_ema_tokens", model, stats_.ema());
    w.family("pagoda_context_length_requests_total", "counter",
             "Finished requests in the context-length statistics (persisted across restarts).");
    w.sample("pagoda_context_length_requests_total", model, double(stats_.all().count()));
    w.family("pagoda_block_size_decisions_total", "counter",
             "Block-size policy decisions since start, by action.");
    for (const auto& [action, n] : decisions_) {
        w.sample("pagoda_block_size_decisions_total",
                 {{"model_name", model_name}, {"action", action}}, double(n));
    }
    w.family("pagoda_oom_risk", "gauge", "1 while an OOM-risk signal holds, by signal.");
    for (const char* name : {"kv_free_blocks", "preemption_rate", "rss", "pool_allocation"}) {
        const bool on = std::any_of(signals_.begin(), signals_.end(),
                                    [&](const GuardSignal& g) { return g.name == name; });
        w.sample("pagoda_oom_risk", {{"model_name", model_name}, {"signal", name}}, on ? 1 : 0);
    }
    w.family("pagoda_oom_risk_seconds_total", "counter",
             "Control ticks (about one per second) in which each OOM-risk signal held.");
    for (const auto& [name, n] : signal_counts_) {
        w.sample("pagoda_oom_risk_seconds_total", {{"model_name", model_name}, {"signal", name}},
                 double(n));
    }
    w.family("pagoda_automation_paused", "gauge",
             "1 when automatic actions are paused or in dry-run (recorded, not applied).");
    w.sample("pagoda_automation_paused", model, automation_ == Automation::kOn ? 0 : 1);
    return out + w.text();
}

}  // namespace pagoda::control
