// `pagoda bench`'s load flags and the scenario they describe (apps/bench_flags.h).
#include "apps/bench_flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <filesystem>

#include "bench/baseline.h"
#include "control/alerting/rule_expr.h"

namespace pagoda::app {

using namespace pagoda::bench;

namespace {

// A compound duration such as 7d5h30m (units ms, s, m, h, d), in seconds.
Result<double> parse_compound_seconds(const std::string& text) {
    double total = 0;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = pos;
        while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
        while (end < text.size() && std::isalpha(static_cast<unsigned char>(text[end]))) ++end;
        PAGODA_ASSIGN_OR_RETURN(int64_t ms,
                                control::parse_duration_ms(text.substr(pos, end - pos)));
        total += double(ms) / 1000.0;
        pos = end;
    }
    return total;
}

// "FROM-TO" or "FROM-" into the scenario's trace window.
Status apply_time_window(const std::string& w, Arrival& a) {
    const size_t dash = w.find('-');
    auto bad = [&](const std::string& why) {
        return make_error(ErrorCode::kInvalidArgument,
                          "--time-window '{}': {} (expected FROM-TO in trace time after the first "
                          "request, e.g. 10m-40m, 7d5h-7d9h or 2h-)",
                          w, why);
    };
    if (dash == std::string::npos) return bad("no '-'");
    auto from = parse_compound_seconds(w.substr(0, dash));
    auto to = parse_compound_seconds(w.substr(dash + 1));
    if (!from.ok()) return bad(from.error().message);
    if (!to.ok()) return bad(to.error().message);
    if (*to > 0 && *to <= *from) return bad("the end is not after the start");
    a.trace_window_from_s = *from;
    a.trace_window_to_s = *to;
    return ok_status();
}

// --speed, --rate-scale, --length-scale, --on-overlong and --time-window: trace replays only.
Status apply_trace_flags(const BenchFlags& f, Scenario& s) {
    const bool given = f.speed != 1 || f.rate_scale != 1 || f.length_scale != 1 ||
                       !f.on_overlong.empty() || !f.time_window.empty() || !f.trace_model.empty();
    if (!given) return ok_status();
    if (s.arrival.kind != Arrival::Kind::kTrace) {
        return make_error(
            ErrorCode::kInvalidArgument,
            "--speed, --rate-scale, --length-scale, --on-overlong, --time-window and "
            "--trace-model apply to trace replays (--trace FILE, or a scenario with process = "
            "\"trace\")");
    }
    if (!f.time_window.empty()) PAGODA_TRY(apply_time_window(f.time_window, s.arrival));
    s.arrival.trace_model = f.trace_model;
    s.arrival.trace_speed *= f.speed;
    s.arrival.trace_rate_scale *= f.rate_scale;
    s.arrival.trace_length_scale *= f.length_scale;
    if (f.on_overlong == "skip") s.arrival.on_overlong = Arrival::Overlong::kSkip;
    if (f.on_overlong == "clamp") s.arrival.on_overlong = Arrival::Overlong::kClamp;
    if (f.on_overlong == "error") s.arrival.on_overlong = Arrival::Overlong::kError;
    return ok_status();
}

}  // namespace

Result<Scenario> build_scenario(const BenchFlags& f) {
    Scenario s;
    const bool quick = (f.rate > 0 || f.concurrency > 0) && f.scenario_file.empty() &&
                       f.preset_name.empty() && f.trace.empty();
    if (int(!f.scenario_file.empty()) + int(!f.preset_name.empty()) + int(!f.trace.empty()) +
            int(quick) !=
        1) {
        return make_error(ErrorCode::kInvalidArgument,
                          "say what load to send: one of --scenario FILE, --preset NAME, --trace "
                          "FILE, or --rate R / --concurrency C "
                          "(presets: 1k, 4k, 32k, 50rps, 200rps, 500rps, mix-70-30, burst)");
    }
    if (!f.trace.empty()) {
        s.name = "trace:" + std::filesystem::path(f.trace).filename().string();
        s.arrival.kind = Arrival::Kind::kTrace;
        s.arrival.trace = f.trace;
        s.classes = {RequestClass{}};
    } else if (!f.scenario_file.empty()) {
        PAGODA_ASSIGN_OR_RETURN(s, load_scenario_file(f.scenario_file));
    } else if (!f.preset_name.empty()) {
        PAGODA_ASSIGN_OR_RETURN(s, preset(f.preset_name));
    } else {
        if (f.rate > 0 && f.concurrency > 0) {
            return make_error(
                ErrorCode::kInvalidArgument,
                "--rate (open loop) and --concurrency (closed loop) exclude each other");
        }
        s.name = f.rate > 0 ? fmt::format("rate-{}", f.rate)
                            : fmt::format("concurrency-{}", f.concurrency);
        if (f.rate > 0) {
            Phase p;
            p.rate = f.rate;
            p.burstiness = f.burstiness;
            p.process = f.process == "constant" ? Phase::Process::kConstant
                        : f.process == "gamma"  ? Phase::Process::kGamma
                                                : Phase::Process::kPoisson;
            s.arrival.phases = {p};
        } else {
            s.arrival.kind = Arrival::Kind::kClosed;
            s.arrival.concurrency = f.concurrency;
        }
        RequestClass c;
        c.input.value = double(f.input_len > 0 ? f.input_len : 128);
        c.output.value = double(f.output_len > 0 ? f.output_len : 128);
        s.classes = {c};
        if (f.duration.empty() && f.requests <= 0) s.requests = 100;
    }
    if (f.scale != 1) s.scale(f.scale);
    PAGODA_TRY(apply_trace_flags(f, s));
    if (!quick && f.rate > 0) {
        // A scenario or preset at another rate: the first phase gets it, the others keep their
        // ratio.
        if (s.arrival.kind != Arrival::Kind::kOpen) {
            return make_error(ErrorCode::kInvalidArgument,
                              "--rate applies to open-loop scenarios; this one is {}",
                              s.arrival.kind == Arrival::Kind::kClosed
                                  ? "a closed loop (use --concurrency)"
                                  : "a trace replay");
        }
        double k = f.rate / s.arrival.phases[0].rate;
        for (auto& ph : s.arrival.phases) ph.rate *= k;
    }
    if (!quick && f.concurrency > 0) {
        if (s.arrival.kind != Arrival::Kind::kClosed) {
            return make_error(ErrorCode::kInvalidArgument,
                              "--concurrency applies to closed-loop scenarios; this one is "
                              "open-loop (use --rate)");
        }
        s.arrival.concurrency = f.concurrency;
    }
    if (!f.duration.empty()) {
        PAGODA_ASSIGN_OR_RETURN(double d, parse_duration(f.duration));
        if (!(d > 0)) return make_error(ErrorCode::kInvalidArgument, "--duration must be > 0");
        s.set_duration(d);
    }
    if (f.requests > 0) s.requests = f.requests;
    if (!f.warmup.empty()) {
        PAGODA_ASSIGN_OR_RETURN(s.warmup_s, parse_duration(f.warmup));
    }
    if (!f.cooldown.empty()) {
        PAGODA_ASSIGN_OR_RETURN(s.cooldown_s, parse_duration(f.cooldown));
    }
    if (!f.timeout.empty()) {
        PAGODA_ASSIGN_OR_RETURN(s.timeout_s, parse_duration(f.timeout));
        if (!(s.timeout_s > 0))
            return make_error(ErrorCode::kInvalidArgument, "--timeout must be > 0");
    }
    if (f.seed >= 0) s.seed = uint64_t(f.seed);
    if (!f.endpoint.empty()) s.endpoint = f.endpoint;
    if (!f.model.empty()) s.model = f.model;
    if (!quick) {
        if (f.input_len > 0 || f.output_len > 0) {
            for (auto& c : s.classes) {
                if (f.input_len > 0) {
                    c.input = LengthDist{};
                    c.input.value = double(f.input_len);
                }
                if (f.output_len > 0) {
                    c.output = LengthDist{};
                    c.output.value = double(f.output_len);
                }
            }
        }
    }
    // Criteria on the command line replace those of the scenario or preset.
    if (!f.criteria.empty()) s.criteria.clear();
    for (const auto& text : f.criteria) {
        PAGODA_ASSIGN_OR_RETURN(Criterion c, parse_criterion(text));
        if (!c.klass.empty() && std::none_of(s.classes.begin(), s.classes.end(),
                                             [&](const auto& k) { return k.name == c.klass; })) {
            return make_error(ErrorCode::kInvalidArgument,
                              "--criteria '{}': the scenario has no class '{}'", text, c.klass);
        }
        s.criteria.push_back(c);
    }
    PAGODA_TRY(s.validate());
    return s;
}

void add_load_flags(CLI::App* c, BenchFlags& f) {
    c->add_option("--url", f.url, "Base URL of the OpenAI-compatible server")
        ->capture_default_str();
    c->add_option("--api-key", f.api_key, "Sent as 'Authorization: Bearer KEY'");
    c->add_option("--model", f.model, "Model name to request (default: the server's first model)");
    c->add_option("--scenario", f.scenario_file, "TOML scenario file (see docs/bench.md)");
    c->add_option("--preset", f.preset_name, "Built-in scenario: " + preset_help());
    c->add_option("--trace", f.trace,
                  "Replay a trace: Pagoda JSONL ({\"timestamp\": seconds, \"input_len\", "
                  "\"output_len\"[, \"prompt\", \"class\"]}), Mooncake JSONL, an Azure LLM "
                  "inference CSV or a BurstGPT CSV, detected from the first line (docs/bench.md)")
        ->check(CLI::ExistingFile);
    c->add_option("--speed", f.speed,
                  "Trace replay: compress wall time by this factor (pair with pagoda serve "
                  "--sim-speed)")
        ->check(CLI::PositiveNumber);
    c->add_option("--rate-scale", f.rate_scale,
                  "Trace replay: multiply arrival rates (gaps divided)")
        ->check(CLI::PositiveNumber);
    c->add_option("--length-scale", f.length_scale,
                  "Trace replay: multiply prompt and output lengths (a 14k-token trace on a 2k "
                  "model: 0.1)")
        ->check(CLI::PositiveNumber);
    c->add_option("--trace-model", f.trace_model,
                  "Trace replay of a BurstGPT CSV: only the rows of this Model (e.g. ChatGPT)");
    c->add_option("--time-window", f.time_window,
                  "Trace replay: only the requests FROM-TO after the trace's first (trace time, "
                  "e.g. 10m-40m or 7d5h-7d9h); the replay starts at FROM");
    c->add_option("--on-overlong", f.on_overlong,
                  "Trace requests longer than the server's context: error (default), skip, or "
                  "clamp (shorten the prompt)")
        ->check(CLI::IsMember({"error", "skip", "clamp"}));
    c->add_option("--rate", f.rate,
                  "Open loop at this many requests/s (with a scenario or preset: its first phase's "
                  "rate, the others in proportion)")
        ->check(CLI::PositiveNumber);
    c->add_option("--concurrency", f.concurrency,
                  "Quick run: closed loop with this many requests in flight")
        ->check(CLI::PositiveNumber);
    c->add_option("--process", f.process, "Arrival process of --rate: poisson, constant or gamma")
        ->check(CLI::IsMember({"poisson", "constant", "gamma"}))
        ->capture_default_str();
    c->add_option("--burstiness", f.burstiness,
                  "Gamma shape for --process gamma (1 = Poisson, < 1 burstier)")
        ->check(CLI::PositiveNumber);
    c->add_option("--duration", f.duration,
                  "Run length, e.g. 30s or 2m (for a preset: stretches its phases)");
    c->add_option("--requests", f.requests,
                  "Send this many requests (quick runs default to 100); a closed loop with "
                  "--duration as well builds at most 4096 prompts and cycles through them")
        ->check(CLI::PositiveNumber);
    c->add_option("--input-len", f.input_len,
                  "Prompt tokens per request (quick run default 128; overrides a scenario's)")
        ->check(CLI::PositiveNumber);
    c->add_option("--output-len", f.output_len, "Output tokens per request (quick run default 128)")
        ->check(CLI::PositiveNumber);
    c->add_option("--warmup", f.warmup,
                  "Leave requests sent in this first stretch out of the statistics");
    c->add_option("--cooldown", f.cooldown,
                  "Leave requests scheduled in this last stretch out of the statistics");
    c->add_option("--timeout", f.timeout,
                  "Longest silence one request may meet, queueing included (default 600s, as "
                  "the scenario's timeout)");
    c->add_option("--scale", f.scale,
                  "Multiply rates and lengths by this factor (e.g. 0.05 for a small machine)")
        ->check(CLI::Range(1e-6, 1e6));
    c->add_option("--seed", f.seed, "Random seed for arrivals, lengths and prompts");
    c->add_option("--endpoint", f.endpoint, "completions or chat")
        ->check(CLI::IsMember({"completions", "chat"}));
    c->add_option("--criteria", f.criteria,
                  "Acceptance criterion, repeatable: '[class:] METRIC OP NUMBER', e.g. "
                  "'p99_ttft_ms < 800'; replaces the scenario's");
    c->add_option(
        "--tokenizer", f.tokenizer,
        "GGUF file whose tokenizer counts prompt tokens (default: the server's /tokenize)");
    c->add_option("--json", f.json_out, "Write the JSON report here");
    c->add_option("--db", f.db,
                  "Baseline store (SQLite; default " + BaselineStore::default_path() + ")");
    c->add_flag("--no-progress", f.no_progress, "No live progress line even on a terminal");
}

}  // namespace pagoda::app
