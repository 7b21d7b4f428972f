// `pagoda bench`: load scenarios against any OpenAI-compatible endpoint, acceptance verdicts,
// a SQLite performance-baseline store, canary comparison of two endpoints, and capacity
// sweeps. Exit status: 0 pass (or no criteria), 1 fail or regression, 2 bad input or an
// unreachable server.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "apps/bench_flags.h"
#include "apps/cli_common.h"
#include "apps/commands.h"
#include "bench/baseline.h"
#include "bench/output.h"
#include "bench/runner.h"
#include "bench/scenario.h"
#include "bench/stats.h"
#include "bench/workload.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::app {
namespace {

using json = nlohmann::json;
using namespace pagoda::bench;

std::atomic<bool> g_interrupted{false};
extern "C" void on_bench_signal(int) { g_interrupted = true; }

int bad(const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.message.c_str());
    return 2;
}

std::string utc_now() {
    std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

Status write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path);
    if (!out) return make_error(ErrorCode::kIo, "cannot write '{}'", path);
    out << text;
    if (!out) return make_error(ErrorCode::kIo, "cannot write '{}'", path);
    return ok_status();
}

// Everything a run needs, connected and planned.
struct Prepared {
    Scenario s;
    std::vector<Target> targets;
    std::unique_ptr<PromptBuilder> builder;
    model::OpenedGguf gguf;
    std::optional<tokenizer::Tokenizer> tok;
    // Prompt text differs from invocation to invocation (lengths and times follow the seed),
    // so a server's prefix cache never serves a repeated benchmark from the last one's prompts.
    uint64_t nonce = std::random_device{}();
    int64_t overlong_skipped = 0, overlong_clamped = 0;  // trace requests over max_model_len
};

Result<std::unique_ptr<Prepared>> prepare(const BenchFlags& f, Scenario s) {
    auto p = std::make_unique<Prepared>();
    p->s = std::move(s);
    std::vector<std::string> urls =
        f.compare_endpoints.empty() ? std::vector<std::string>{f.url} : f.compare_endpoints;
    for (const auto& u : urls) {
        PAGODA_ASSIGN_OR_RETURN(Target t, connect_target(u, f.api_key, p->s.model, p->s.timeout_s));
        p->targets.push_back(std::move(t));
    }
    TokenCounter counter;
    if (!f.tokenizer.empty()) {
        PAGODA_ASSIGN_OR_RETURN(p->gguf, model::open_gguf(f.tokenizer));
        PAGODA_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::from_gguf(*p->gguf.gguf));
        p->tok.emplace(std::move(tok));
        const tokenizer::Tokenizer* tk = &*p->tok;
        counter = [tk](const std::string& text) -> Result<int64_t> {
            return int64_t(tk->encode(text).size());
        };
    } else {
        counter = server_token_counter(p->targets[0]);
        if (!counter) {
            std::fprintf(stderr,
                         "warning: %s has no /tokenize and no --tokenizer was given: prompt "
                         "lengths are approximate "
                         "(about 4 characters a token)\n",
                         f.url.c_str());
            counter = approximate_token_counter();
        }
    }
    p->builder = std::make_unique<PromptBuilder>(std::move(counter));
    return p;
}

// Requests of prompt + output above the server's context: an error that says which flag
// fixes it, or (traces) left out or clamped as --on-overlong says, counted in `p`.
Status handle_overlong(Prepared& p, const BenchFlags& f, std::vector<PlannedRequest>& plan,
                       int64_t max_len) {
    const bool trace = p.s.arrival.kind == Arrival::Kind::kTrace;
    int64_t over = 0;
    const PlannedRequest* longest = nullptr;
    for (const auto& r : plan) {
        if (r.input_len + r.output_len <= max_len) continue;
        ++over;
        if (longest == nullptr ||
            r.input_len + r.output_len > longest->input_len + longest->output_len)
            longest = &r;
    }
    if (over == 0) return ok_status();
    const double fit = double(max_len) / double(longest->input_len + longest->output_len) * 0.9;
    if (!trace) {
        return make_error(ErrorCode::kInvalidArgument,
                          "class '{}' asks for {} prompt + {} output tokens, but the server's "
                          "max_model_len is {}; shrink the lengths (for example --scale {:.2g})",
                          p.s.classes[size_t(longest->klass)].name, longest->input_len,
                          longest->output_len, max_len, fit * f.scale);
    }
    switch (p.s.arrival.on_overlong) {
        case Arrival::Overlong::kError:
            return make_error(
                ErrorCode::kInvalidArgument,
                "{} of {} trace requests ask for more than the server's max_model_len {} (the "
                "longest: {} prompt + {} output tokens); shrink every length with --length-scale "
                "{:.2g}, or --on-overlong skip (leave them out) or clamp (shorten their prompts)",
                over, plan.size(), max_len, longest->input_len, longest->output_len,
                fit * p.s.arrival.trace_length_scale);
        case Arrival::Overlong::kSkip:
            std::erase_if(plan, [&](const PlannedRequest& r) {
                return r.input_len + r.output_len > max_len;
            });
            p.overlong_skipped = over;
            if (plan.empty()) {
                return make_error(ErrorCode::kInvalidArgument,
                                  "every trace request is over max_model_len {}; nothing to send",
                                  max_len);
            }
            break;
        case Arrival::Overlong::kClamp:
            for (auto& r : plan) {
                if (r.input_len + r.output_len <= max_len) continue;
                r.output_len = std::min<int64_t>(r.output_len, max_len - 1);
                r.input_len = max_len - r.output_len;
                r.has_prompt = false;
                r.prompt.clear();
            }
            p.overlong_clamped = over;
            break;
    }
    std::fprintf(stderr, "trace: %lld of %zu requests over max_model_len %lld %s\n",
                 (long long)over, plan.size() + size_t(p.overlong_skipped), (long long)max_len,
                 p.overlong_skipped > 0 ? "left out (--on-overlong skip)"
                                        : "had their prompts shortened (--on-overlong clamp)");
    return ok_status();
}

Result<std::vector<PlannedRequest>> plan_for(Prepared& p, const BenchFlags& f, uint64_t variant,
                                             int64_t* exact) {
    PAGODA_ASSIGN_OR_RETURN(auto plan, make_plan(p.s));
    const int64_t max_len = p.targets[0].max_model_len;
    if (max_len > 0) PAGODA_TRY(handle_overlong(p, f, plan, max_len));
    const bool tty = !f.no_progress && isatty(2);
    PAGODA_TRY(fill_prompts(
        p.s, plan, *p.builder,
        [tty](size_t done, size_t total) {
            if (tty && (done % 16 == 0 || done == total))
                progress_bar("preparing prompts", done, total);
        },
        exact, variant));
    return plan;
}

struct OneRun {
    RunResult result;
    std::vector<Report> reports;  // per target
};

Result<OneRun> run_once(Prepared& p, const BenchFlags& f, uint64_t variant,
                        const std::string& label) {
    int64_t exact = 0;
    PAGODA_ASSIGN_OR_RETURN(auto plan, plan_for(p, f, p.nonce * 7919 + variant, &exact));
    int64_t synthesised = 0;
    for (const auto& r : plan) synthesised += r.input_len > 0 ? 1 : 0;
    std::vector<std::map<std::string, double>> before;
    for (auto& t : p.targets) before.push_back(scrape_metrics(t));
    std::vector<Target*> tp;
    for (auto& t : p.targets) tp.push_back(&t);
    RunOptions ro;
    ro.progress = !f.no_progress && isatty(2);
    ro.interrupted = [] { return g_interrupted.load(); };
    ro.label = label;
    std::string started = utc_now();
    OneRun out;
    out.result = run_plan(p.s, plan, tp, ro);
    for (size_t i = 0; i < p.targets.size(); ++i) {
        Report r = build_report(p.s, out.result.records, out.result.duration_s, int(i));
        r.url = p.targets[i].url;
        r.model = p.targets[i].model;
        r.started_at = started;
        r.aborted = out.result.aborted;
        r.prompts_exact = exact;
        r.prompts_synthesised = synthesised;
        const auto after = scrape_metrics(p.targets[i]);
        r.server_metrics_json = metric_deltas_json(before[i], after);
        r.overall.busy_ratio = busy_ratio(before[i], after, out.result.duration_s);
        evaluate_criteria(p.s, r);  // with the server's busy ratio
        r.server_info_json = p.targets[i].info_json;
        if (i == 0) r.server = out.result.server;
        if (!r.aborted.empty() && r.aborted != "interrupted")
            r.verdict = "fail";  // a stop condition fired
        out.reports.push_back(std::move(r));
    }
    return out;
}

json itl_ms(const RequestRecord& r) {
    json a = json::array();
    for (size_t i = 1; i < r.token_s.size(); ++i)
        a.push_back(std::round((r.token_s[i] - r.token_s[i - 1]) * 1e6) / 1e3);
    return a;
}

Result<std::unique_ptr<BaselineStore>> open_store(const BenchFlags& f) {
    return BaselineStore::open(f.db.empty() ? BaselineStore::default_path() : f.db);
}

int run_bench(const BenchFlags& f) {
    auto sc = build_scenario(f);
    if (!sc) return bad(sc.error());
    if (f.compare_endpoints.size() == 2 && (!f.save_baseline.empty() || !f.compare.empty())) {
        return bad(
            make_error(ErrorCode::kInvalidArgument,
                       "--compare-endpoints does not mix with --save-baseline or --compare"));
    }
    std::unique_ptr<BaselineStore> store;
    if (!f.no_record || !f.save_baseline.empty() || !f.compare.empty()) {
        auto st = open_store(f);
        if (!st) return bad(st.error());
        store = std::move(*st);
    }
    std::vector<RunRow> base_rows;
    if (!f.compare.empty()) {
        auto rows = store->baseline(f.compare);
        if (!rows) return bad(rows.error());
        if (rows->empty()) {
            auto names = store->baseline_names();
            std::string list;
            if (names) {
                for (const auto& n : *names) list += (list.empty() ? "" : ", ") + n;
            }
            return bad(make_error(ErrorCode::kNotFound,
                                  "no baseline named '{}' in {} (saved baselines: {})", f.compare,
                                  f.db.empty() ? BaselineStore::default_path() : f.db,
                                  list.empty() ? "none" : list));
        }
        base_rows = std::move(*rows);
    }
    auto prep = prepare(f, *sc);
    if (!prep) return bad(prep.error());
    Prepared& p = **prep;
    std::signal(SIGINT, on_bench_signal);

    std::vector<std::map<std::string, double>> current;
    std::vector<int64_t> ids;
    OneRun last;
    for (int rep = 0; rep < f.repeat && !g_interrupted; ++rep) {
        std::string label = f.repeat > 1 ? fmt::format("run {}/{}", rep + 1, f.repeat) : "";
        auto run = run_once(p, f, uint64_t(rep), label);
        if (!run) return bad(run.error());
        last = std::move(*run);
        const Report& r = last.reports[0];
        if (last.reports.size() == 1) {
            std::printf("%s%s", label.empty() ? "" : (label + ": ").c_str(),
                        terminal_summary(r).c_str());
        }
        current.push_back(baseline_values(r));
        if (store && last.reports.size() == 1) {
            RunRow row;
            row.scenario = p.s.name;
            row.scenario_hash = r.scenario_hash;
            row.url = r.url;
            row.model = r.model;
            row.hardware = hardware_fingerprint();
            row.version = PAGODA_VERSION;
            row.verdict = r.verdict;
            row.server_json = r.server_info_json;
            row.metrics = current.back();
            auto id = store->record(row);
            if (!id) return bad(id.error());
            ids.push_back(*id);
        }
        if (r.overall.completed == 0 && r.overall.failed > 0) {
            auto it = std::find_if(last.result.records.begin(), last.result.records.end(),
                                   [](const auto& x) { return !x.ok(); });
            std::fprintf(stderr, "error: every request failed; first error: %s (%s)\n",
                         it != last.result.records.end() ? it->error.c_str() : "?",
                         it != last.result.records.end() ? it->error_kind.c_str() : "?");
            if (it != last.result.records.end() && (it->error_kind == "connect")) return 2;
        }
    }
    if (last.reports.empty()) return bad(make_error(ErrorCode::kInternal, "no run completed"));
    int exit_code = last.reports[0].verdict == "fail" ? 1 : 0;
    json out = report_json(last.reports[0]);
    if (p.s.arrival.kind == Arrival::Kind::kTrace) {
        const Arrival& a = p.s.arrival;
        out["trace"] = {{"file", a.trace},
                        {"speed", a.trace_speed},
                        {"rate_scale", a.trace_rate_scale},
                        {"length_scale", a.trace_length_scale},
                        {"on_overlong", a.on_overlong == Arrival::Overlong::kSkip    ? "skip"
                                        : a.on_overlong == Arrival::Overlong::kClamp ? "clamp"
                                                                                     : "error"},
                        {"skipped", p.overlong_skipped},
                        {"clamped", p.overlong_clamped},
                        {"time_window_s", {a.trace_window_from_s, a.trace_window_to_s}},
                        {"model_filter", a.trace_model}};
    }
    if (f.repeat > 1) out["runs"] = current;
    if (!f.save_baseline.empty()) {
        auto st = store->save_baseline(f.save_baseline, ids);
        if (!st) return bad(st.error());
        std::printf("saved baseline '%s' (%zu run%s)\n", f.save_baseline.c_str(), ids.size(),
                    ids.size() == 1 ? "" : "s");
    }
    if (!f.compare.empty()) {
        std::vector<std::map<std::string, double>> base;
        for (const auto& r : base_rows) base.push_back(r.metrics);
        if (base_rows[0].scenario_hash != last.reports[0].scenario_hash) {
            std::fprintf(
                stderr,
                "warning: baseline '%s' was recorded with a different scenario (hash %s, now %s)\n",
                f.compare.c_str(), base_rows[0].scenario_hash.c_str(),
                last.reports[0].scenario_hash.c_str());
        }
        if (base_rows[0].model != last.reports[0].model) {
            std::fprintf(stderr, "warning: baseline '%s' ran model '%s', this run '%s'\n",
                         f.compare.c_str(), base_rows[0].model.c_str(),
                         last.reports[0].model.c_str());
        }
        auto deltas = compare_runs(base, current, f.tolerance);
        bool regression = std::any_of(deltas.begin(), deltas.end(),
                                      [](const auto& d) { return d.verdict == "regression"; });
        std::printf("\ncompared with baseline '%s' (%zu run%s, %s):\n%s", f.compare.c_str(),
                    base.size(), base.size() == 1 ? "" : "s", base_rows[0].created_at.c_str(),
                    deltas_table(deltas).c_str());
        std::printf("regression verdict: %s\n", regression ? "REGRESSION" : "ok");
        out["comparison"] = {
            {"baseline", f.compare}, {"metrics", deltas_json(deltas)}, {"regression", regression}};
        if (regression) exit_code = 1;
    }
    if (last.reports.size() == 2) {
        const Report& a = last.reports[0];
        const Report& b = last.reports[1];
        std::printf("A: %s\n%s\nB: %s\n%s", a.url.c_str(), terminal_summary(a).c_str(),
                    b.url.c_str(), terminal_summary(b).c_str());
        json cmp = json::array();
        bool worse = false;
        std::printf("\n%-10s %12s %12s %9s %10s  %s\n", "metric", "A median", "B median", "delta",
                    "p-value", "verdict");
        for (const char* m : {"ttft", "tpot", "e2e"}) {
            std::vector<double> va, vb;
            for (const auto& r : last.result.records) {
                if (!r.ok()) continue;
                double v = std::string(m) == "ttft"   ? r.ttft_ms()
                           : std::string(m) == "tpot" ? r.tpot_ms()
                                                      : r.e2e_ms();
                if (std::isnan(v)) continue;
                (r.target == 0 ? va : vb).push_back(v);
            }
            auto mw = mann_whitney(va, vb);
            double ma = summarize(va).p50, mb = summarize(vb).p50;
            double delta = ma > 0 ? (mb - ma) / ma : 0;
            bool sig = mw.p_value < 0.05;
            std::string verdict = !sig                              ? "same"
                                  : std::fabs(delta) <= f.tolerance ? "differs, within tolerance"
                                  : delta > 0                       ? "B worse"
                                                                    : "B better";
            worse = worse || verdict == "B worse";
            std::printf("%-10s %12.1f %12.1f %8.1f%% %10.3g  %s\n",
                        (std::string(m) + "_ms").c_str(), ma, mb, delta * 100, mw.p_value,
                        verdict.c_str());
            cmp.push_back({{"metric", std::string(m) + "_ms"},
                           {"a_median", ma},
                           {"b_median", mb},
                           {"delta_rel", delta},
                           {"u", mw.u},
                           {"z", mw.z},
                           {"p_value", mw.p_value},
                           {"verdict", verdict}});
        }
        out = {{"schema", "pagoda-bench-compare/1"},
               {"a", report_json(a)},
               {"b", report_json(b)},
               {"comparison", cmp},
               {"verdict", worse ? "fail" : "pass"}};
        std::printf("canary verdict: %s\n", worse ? "FAIL (B is significantly worse)" : "pass");
        exit_code = worse ? 1 : 0;
    }
    if (!f.json_out.empty()) {
        auto st = write_file(f.json_out, out.dump(2) + "\n");
        if (!st) return bad(st.error());
    }
    if (!f.html_out.empty()) {
        last.reports[0].trace_skipped = p.overlong_skipped;
        last.reports[0].trace_clamped = p.overlong_clamped;
        auto st = write_file(f.html_out, html_report(last.reports[0], p.s, last.result.records));
        if (!st) return bad(st.error());
    }
    if (!f.requests_out.empty()) {
        std::string lines;
        for (const auto& r : last.result.records) {
            json j = {{"class", p.s.classes[size_t(r.klass)].name},
                      {"target", r.target},
                      {"scheduled_s", r.scheduled_s},
                      {"sent_s", r.sent_s},
                      {"first_token_s", r.first_token_s},
                      {"done_s", r.done_s},
                      {"ttft_ms", r.first_token_s >= 0 ? json(r.ttft_ms()) : json(nullptr)},
                      {"e2e_ms", r.e2e_ms()},
                      {"target_input_tokens", r.target_input},
                      {"target_output_tokens", r.target_output},
                      {"prompt_tokens", r.prompt_tokens},
                      {"completion_tokens", r.completion_tokens},
                      {"token_chunks", r.token_s.size()},
                      {"itl_ms", itl_ms(r)},
                      {"status", r.status},
                      {"error_kind", r.ok() ? json(nullptr) : json(r.error_kind)},
                      {"error", r.ok() ? json(nullptr) : json(r.error)}};
            lines += j.dump() + "\n";
        }
        auto st = write_file(f.requests_out, lines);
        if (!st) return bad(st.error());
    }
    if (g_interrupted) return 130;
    return exit_code;
}

int run_history(const BenchFlags& f) {
    auto store = open_store(f);
    if (!store) return bad(store.error());
    auto rows = (*store)->history(f.history_limit);
    if (!rows) return bad(rows.error());
    if (rows->empty()) {
        std::printf("no runs recorded in %s\n",
                    f.db.empty() ? BaselineStore::default_path().c_str() : f.db.c_str());
        return 0;
    }
    std::printf("%-5s %-20s %-12s %-14s %-18s %9s %9s %9s %-7s %s\n", "id", "when (UTC)",
                "baseline", "scenario", "model", "p99 ttft", "out tok/s", "req/s", "verdict",
                "url");
    for (const auto& r : *rows) {
        auto m = [&](const char* k) {
            auto it = r.metrics.find(k);
            return it == r.metrics.end() ? NAN : it->second;
        };
        std::printf("%-5lld %-20s %-12s %-14s %-18s %9.1f %9.1f %9.2f %-7s %s\n", (long long)r.id,
                    r.created_at.c_str(), r.baseline.substr(0, 12).c_str(),
                    r.scenario.substr(0, 14).c_str(), r.model.substr(0, 18).c_str(),
                    m("p99_ttft_ms"), m("output_tokens_per_s"), m("requests_per_s"),
                    r.verdict.c_str(), r.url.c_str());
    }
    return 0;
}

int run_sweep(BenchFlags f) {
    if (f.scenario_file.empty() && f.preset_name.empty() && f.rate <= 0 && f.concurrency <= 0 &&
        !f.rates.empty()) {
        f.rate = f.rates[0];
    }
    auto sc = build_scenario(f);
    if (!sc) return bad(sc.error());
    if (sc->arrival.kind != Arrival::Kind::kOpen) {
        return bad(
            make_error(ErrorCode::kInvalidArgument,
                       "sweep needs an open-loop scenario (a rate), not a closed loop or trace"));
    }
    if (f.rates.empty())
        return bad(make_error(ErrorCode::kInvalidArgument,
                              "sweep needs --rates R1,R2,... (requests per second, rising)"));
    if (sc->criteria.empty()) {
        sc->criteria.push_back(*parse_criterion(fmt::format("goodput_ratio >= {}", f.min_goodput)));
        sc->criteria.push_back(*parse_criterion("error_rate < 0.01"));
    }
    auto prep = prepare(f, *sc);
    if (!prep) return bad(prep.error());
    Prepared& p = **prep;
    std::signal(SIGINT, on_bench_signal);
    const double base_rate = sc->arrival.phases[0].rate;
    json steps = json::array();
    double capacity = 0;
    std::printf("%8s %9s %9s %9s %9s %9s %8s  %s\n", "rate", "achieved", "ttft p50", "ttft p99",
                "tpot p99", "out tok/s", "goodput", "verdict");
    for (size_t i = 0; i < f.rates.size() && !g_interrupted; ++i) {
        p.s = *sc;
        for (auto& ph : p.s.arrival.phases) ph.rate *= f.rates[i] / base_rate;
        auto run = run_once(p, f, uint64_t(i), fmt::format("rate {}", f.rates[i]));
        if (!run) return bad(run.error());
        const Report& r = run->reports[0];
        std::printf("%8.3g %9.3g %9.1f %9.1f %9.1f %9.1f %7.0f%%  %s\n", f.rates[i],
                    r.overall.requests_per_s, r.overall.ttft.p50, r.overall.ttft.p99,
                    r.overall.tpot.p99, r.overall.output_tokens_per_s,
                    r.overall.goodput_ratio * 100, r.verdict.c_str());
        std::fflush(stdout);
        json step = report_json(r);
        step.erase("series");
        step["rate"] = f.rates[i];
        steps.push_back(step);
        if (r.verdict != "pass") break;
        capacity = f.rates[i];
    }
    std::string criteria;
    for (const auto& c : sc->criteria) criteria += (criteria.empty() ? "" : ", ") + c.text;
    if (capacity > 0) {
        std::printf("capacity at SLO: %.3g requests/s (%s)\n", capacity, criteria.c_str());
    } else {
        std::printf("capacity at SLO: none of the rates met %s\n", criteria.c_str());
    }
    if (!f.json_out.empty()) {
        json out = {{"schema", "pagoda-bench-sweep/1"},
                    {"scenario", sc->name},
                    {"capacity_rps", capacity},
                    {"steps", steps}};
        auto st = write_file(f.json_out, out.dump(2) + "\n");
        if (!st) return bad(st.error());
    }
    return capacity > 0 ? 0 : 1;
}

}  // namespace

void add_bench(CLI::App& app, std::function<int()>& action) {
    static BenchFlags f;
    auto* c = app.add_subcommand(
        "bench",
        "Load-test an OpenAI-compatible server: scenarios, SLO verdicts (exit 1 on fail), "
        "baselines, canary comparison, capacity sweeps");
    c->require_subcommand(0, 1);
    add_load_flags(c, f);
    c->add_option("--html", f.html_out, "Write a self-contained HTML report here");
    c->add_option("--save-requests", f.requests_out,
                  "Write every request's timings and token counts here (JSONL)");
    c->add_flag("--no-record", f.no_record, "Do not record the run in the baseline store");
    c->add_option("--save-baseline", f.save_baseline,
                  "Save this run (all --repeat runs) as the baseline NAME");
    c->add_option("--compare", f.compare, "Compare with the baseline NAME; exit 1 on a regression");
    c->add_option("--repeat", f.repeat, "Run the workload N times (noise band for baselines)")
        ->check(CLI::Range(1, 100));
    c->add_option("--tolerance", f.tolerance,
                  "Smallest relative change called a regression or a canary difference")
        ->check(CLI::Range(0.0, 10.0))
        ->capture_default_str();
    c->add_option("--compare-endpoints", f.compare_endpoints,
                  "Interleave the workload over two URLs A B and test the difference")
        ->expected(2);
    c->callback([c, &action] {
        if (c->get_subcommands().empty()) action = [] { return run_bench(f); };
    });

    auto* h = c->add_subcommand("history", "List recorded runs, newest first");
    h->add_option("--db", f.db, "Baseline store (SQLite)");
    h->add_option("--limit", f.history_limit, "How many runs")->capture_default_str();
    h->callback([&action] { action = [] { return run_history(f); }; });

    auto* s = c->add_subcommand(
        "sweep", "Raise the rate step by step; report the highest rate that meets the criteria");
    add_load_flags(s, f);
    s->add_option("--rates", f.rates, "Rates to try, rising, e.g. 1,2,4,8")
        ->delimiter(',')
        ->required();
    s->add_option("--min-goodput", f.min_goodput,
                  "Without criteria: the goodput ratio a step must reach")
        ->capture_default_str();
    s->callback([&action] {
        f.no_record = true;
        action = [] { return run_sweep(f); };
    });
    add_trace_stats(c, action);
}

}  // namespace pagoda::app
