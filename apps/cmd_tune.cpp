// pagoda tune: search serving knobs (max_num_seqs, max_num_batched_tokens, block_size,
// tensor_parallel_size) for the configuration with the highest goodput that meets an SLO.
// Every trial starts a short-lived replica (`pagoda serve` with the base flags after `--`
// and the trial's knobs, on a loopback port, in a scratch state directory), runs `pagoda
// bench` against it with the SLO as its criteria, and stops it. The search itself is in
// src/bench/tune.h.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "apps/cli_common.h"
#include "apps/commands.h"
#include "bench/scenario.h"
#include "bench/tune.h"
#include "control/config/state_db.h"
#include "http/client.h"

extern char** environ;

namespace pagoda::app {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct TuneFlags {
    std::string scenario, preset, duration = "20s", slo, search, strategy = "coordinate";
    double scale = 0;
    int max_trials = 40, port = 18400;
    std::string max_time;  // stop starting trials after this long (parse_duration_ms)
    std::string json_out, html_out, output = "pagoda-tuned.toml", work_dir;
    std::vector<std::string> serve_args;  // after --
};

// Starts `argv` with stdout and stderr to `log`; returns the pid.
Result<pid_t> spawn(const std::vector<std::string>& args, const std::string& log) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return make_error(ErrorCode::kIo, "cannot start {}: {}", args[1], strerror(rc));
    return pid;
}

// Waits for `pid` up to `timeout`; then SIGKILL. Returns the exit code (-1 when killed).
int wait_exit(pid_t pid, std::chrono::seconds timeout) {
    const auto end = Clock::now() + timeout;
    int status = 0;
    while (Clock::now() < end) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

std::string tail_of(const std::string& path, size_t lines) {
    std::ifstream in(path);
    std::vector<std::string> all;
    for (std::string l; std::getline(in, l);) all.push_back(l);
    std::string o;
    for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i)
        o += (o.empty() ? "" : " | ") + all[i];
    return o;
}

// The port a replica started with --port 0 logged ("listening url=http://HOST:PORT"), or 0.
int logged_port(const std::string& log) {
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);) {
        const size_t at = line.find("listening url=http://");
        if (at == std::string::npos) continue;
        const size_t colon = line.find(':', at + 21);
        if (colon != std::string::npos) return std::atoi(line.c_str() + colon + 1);
    }
    return 0;
}

// Starts a replica and waits until /ready answers 200 (or it exits); `port` 0 takes the one
// it logs. Returns the pid and sets `port`.
Result<pid_t> start_replica(const std::vector<std::string>& args, const std::string& log,
                            int& port) {
    PAGODA_ASSIGN_OR_RETURN(pid_t pid, spawn(args, log));
    std::unique_ptr<http::Client> client;
    const auto end = Clock::now() + std::chrono::seconds(180);
    while (Clock::now() < end) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            return make_error(ErrorCode::kInvalidArgument, "the replica exited ({}): {}",
                              WIFEXITED(status) ? WEXITSTATUS(status) : -1, tail_of(log, 2));
        }
        if (port == 0) port = logged_port(log);
        if (port != 0 && client == nullptr) {
            PAGODA_ASSIGN_OR_RETURN(
                client,
                http::Client::create(fmt::format("http://127.0.0.1:{}", port),
                                     {.connect_timeout_s = 1, .read_timeout_s = 5, .headers = {}}));
        }
        if (client != nullptr) {
            auto r = client->fetch(
                {.method = "GET", .path = "/ready", .body = {}, .content_type = {}, .headers = {}});
            if (r.ok() && r->status == 200) return pid;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    kill(pid, SIGKILL);
    wait_exit(pid, std::chrono::seconds(5));
    return make_error(ErrorCode::kResourceExhausted, "the replica was not ready after 180 s: {}",
                      tail_of(log, 2));
}

// The share of KV slots left empty in the last block of each finished request.
double kv_waste(const std::string& requests_jsonl, int64_t block_size) {
    std::ifstream in(requests_jsonl);
    double empty = 0, slots = 0;
    for (std::string line; std::getline(in, line);) {
        const json j = json::parse(line, nullptr, false);
        if (!j.is_object() || !j["prompt_tokens"].is_number() ||
            !j["completion_tokens"].is_number())
            continue;
        const int64_t n = j["prompt_tokens"].get<int64_t>() + j["completion_tokens"].get<int64_t>();
        if (n <= 0) continue;
        const int64_t blocks = (n + block_size - 1) / block_size;
        slots += double(blocks * block_size);
        empty += double(blocks * block_size - n);
    }
    return slots > 0 ? empty / slots : 0;
}

double metric_sum(const json& sm, const std::string& name) {
    double v = 0;
    for (auto it = sm.begin(); it != sm.end(); ++it) {
        if (it.key().substr(0, it.key().find('{')) == name && it.value().is_number())
            v += it.value().get<double>();
    }
    return v;
}

void read_report(const std::string& path, bench::Trial& t) {
    std::ifstream in(path);
    const json r = json::parse(in, nullptr, false);
    if (!r.is_object()) {
        t.error = "the bench wrote no report";
        return;
    }
    auto num = [](const json& j, const char* k) {
        return j.contains(k) && j[k].is_number() ? j[k].get<double>() : NAN;
    };
    t.goodput_rps = num(r, "goodput_rps");
    t.requests_per_s = num(r, "requests_per_s");
    t.output_tokens_per_s = num(r, "output_tokens_per_s");
    t.error_rate = num(r, "error_rate");
    t.p99_ttft_ms = num(r["ttft_ms"], "p99");
    t.p99_tpot_ms = num(r["tpot_ms"], "p99");
    t.criteria = r["criteria"];
    t.meets_slo = r["verdict"] == "pass";
    const json& sm = r["server_metrics"];
    if (sm.is_object()) {
        const double steps = metric_sum(sm, "pagoda_engine_steps_total");
        if (steps > 0) t.mean_batch = metric_sum(sm, "pagoda_generation_tokens_total") / steps;
    }
    t.goodput_per_gpu = t.goodput_rps / t.gpus;
}

struct Runner {
    const TuneFlags& f;
    std::vector<std::string> slo;
    std::string dir;
    int count = 0;
    Clock::time_point deadline = Clock::time_point::max();

    bench::Trial operator()(const bench::TuneConfig& c) {
        bench::Trial t;
        t.index = ++count;
        t.config = c;
        if (Clock::now() >= deadline) {
            t.error = "not run: --max-time reached";
            return t;
        }
        t.gpus = int(c.count("tensor_parallel_size") ? c.at("tensor_parallel_size") : 1);
        const auto t0 = Clock::now();
        int port = f.port == 0 ? 0 : f.port + (t.index % 50);
        const std::string td = fmt::format("{}/trial-{}", dir, t.index);
        std::filesystem::create_directories(td);
        std::vector<std::string> serve = {"pagoda", "serve"};
        serve.insert(serve.end(), f.serve_args.begin(), f.serve_args.end());
        for (const auto& [k, v] : c) {
            std::string flag = "--" + k;
            std::replace(flag.begin(), flag.end(), '_', '-');
            serve.insert(serve.end(), {flag, std::to_string(v)});
        }
        // The bench is over when the replica stops: no drain to wait for.
        serve.insert(serve.end(), {"--host", "127.0.0.1", "--port", std::to_string(port),
                                   "--state-dir", td + "/state", "--shutdown-timeout", "2"});
        // Trials share the replicas' usual weight cache, unless the flags name one: the
        // weights are packed (and the cache written) once, not under every trial's bench.
        const bool own_cache = std::any_of(f.serve_args.begin(), f.serve_args.end(), [](auto& a) {
            return a.rfind("--weight-cache-dir", 0) == 0 || a == "--no-weight-cache";
        });
        if (!own_cache) {
            serve.insert(serve.end(),
                         {"--weight-cache-dir", control::default_state_dir() + "/weight-cache"});
        }
        std::fprintf(stderr, "trial %d: %s ...\n", t.index, bench::config_label(c).c_str());
        auto pid = start_replica(serve, td + "/serve.log", port);
        if (!pid.ok()) {
            t.error = pid.error().message;
            return t;
        }
        std::vector<std::string> bench = {
            "pagoda",          "bench",
            "--url",           fmt::format("http://127.0.0.1:{}", port),
            "--no-record",     "--no-progress",
            "--json",          td + "/report.json",
            "--save-requests", td + "/requests.jsonl"};
        if (!f.scenario.empty()) bench.insert(bench.end(), {"--scenario", f.scenario});
        if (!f.preset.empty()) bench.insert(bench.end(), {"--preset", f.preset});
        if (f.scale > 0) bench.insert(bench.end(), {"--scale", fmt::format("{}", f.scale)});
        if (!f.duration.empty()) bench.insert(bench.end(), {"--duration", f.duration});
        bench.push_back("--criteria");
        bench.insert(bench.end(), slo.begin(), slo.end());
        auto bpid = spawn(bench, td + "/bench.log");
        const int brc = bpid.ok() ? wait_exit(*bpid, std::chrono::seconds(3600)) : -1;
        kill(*pid, SIGTERM);
        wait_exit(*pid, std::chrono::seconds(60));
        if (brc != 0 && brc != 1) {
            t.error = "the bench failed: " + tail_of(td + "/bench.log", 2);
        } else {
            read_report(td + "/report.json", t);
            t.kv_waste =
                kv_waste(td + "/requests.jsonl", c.count("block_size") ? c.at("block_size") : 16);
        }
        t.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
        std::fprintf(stderr, "trial %d: %s, goodput %.2f req/s, p99 TTFT %.0f ms (%.0f s)\n",
                     t.index,
                     !t.error.empty() ? "error"
                     : t.meets_slo    ? "meets the SLO"
                                      : "misses the SLO",
                     t.goodput_rps, t.p99_ttft_ms, t.wall_s);
        return t;
    }
};

// The base serve flags as (long name, value) pairs for the config file; the replica's own
// address and state directory are left out.
std::vector<std::pair<std::string, std::string>> base_flags(const std::vector<std::string>& a) {
    std::vector<std::pair<std::string, std::string>> out;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].rfind("--", 0) != 0) continue;
        std::string k = a[i].substr(2), v;
        if (const size_t eq = k.find('='); eq != std::string::npos) {
            v = k.substr(eq + 1);
            k = k.substr(0, eq);
        } else if (i + 1 < a.size() && a[i + 1].rfind("--", 0) != 0) {
            v = a[++i];
        }
        if (k != "port" && k != "host" && k != "state-dir" && k != "config") out.emplace_back(k, v);
    }
    return out;
}

Status check_flags(const TuneFlags& f, std::vector<std::string>& slo) {
    if (f.scenario.empty() == f.preset.empty())
        return make_error(ErrorCode::kInvalidArgument, "give one of --scenario FILE or --preset");
    if (!f.preset.empty()) {
        if (auto p = bench::preset(f.preset); !p.ok()) return p.error();
    }
    std::stringstream in(f.slo);
    for (std::string item; std::getline(in, item, ',');) {
        if (item.empty()) continue;
        auto c = bench::parse_criterion(item);
        if (!c.ok()) return make_error(ErrorCode::kInvalidArgument, "--slo: {}", c.error().message);
        slo.push_back(item);
    }
    if (slo.empty()) {
        return make_error(
            ErrorCode::kInvalidArgument,
            "--slo needs at least one criterion, e.g. \"p99_ttft_ms<500,p99_tpot_ms<50\"");
    }
    if (f.strategy != "grid" && f.strategy != "coordinate") {
        return make_error(ErrorCode::kInvalidArgument, "--strategy {} (allowed: grid, coordinate)",
                          f.strategy);
    }
    return ok_status();
}

int run_tune(const TuneFlags& f) {
    std::vector<std::string> slo;
    if (Status st = check_flags(f, slo); !st.ok()) {
        std::fprintf(stderr, "error: %s\n", st.error().message.c_str());
        return 2;
    }
    auto knobs = bench::parse_search(f.search);
    if (!knobs.ok()) {
        std::fprintf(stderr, "error: %s\n", knobs.error().message.c_str());
        return 2;
    }
    Runner run{f, slo, f.work_dir, 0};
    if (run.dir.empty()) {
        char tmpl[] = "/tmp/pagoda-tune-XXXXXX";
        run.dir = mkdtemp(tmpl) ? tmpl : "/tmp/pagoda-tune";
    }
    std::filesystem::create_directories(run.dir);
    if (!f.max_time.empty()) {
        auto ms = parse_duration_ms(f.max_time);
        if (!ms.ok()) {
            std::fprintf(stderr, "error: --max-time: %s\n", ms.error().message.c_str());
            return 2;
        }
        run.deadline = Clock::now() + std::chrono::milliseconds(*ms);
    }
    std::fprintf(stderr, "pagoda tune: %s search, trials in %s\n", f.strategy.c_str(),
                 run.dir.c_str());
    const auto t0 = Clock::now();
    std::vector<bench::Trial> trials;
    if (f.strategy == "grid") {
        for (const auto& c : bench::grid(*knobs)) {
            if (int(trials.size()) >= f.max_trials) break;
            trials.push_back(run(c));
        }
    } else {
        trials = bench::coordinate_search(*knobs, std::ref(run), f.max_trials);
    }
    std::erase_if(trials, [](const bench::Trial& t) { return t.error.rfind("not run", 0) == 0; });
    const int best = bench::best_trial(trials);
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("%s", bench::trials_table(trials, best).c_str());
    std::printf("%zu trials in %.0f s (%s search)\n", trials.size(), wall, f.strategy.c_str());
    const std::string title = fmt::format("pagoda tune: {} against {}", f.slo,
                                          f.preset.empty() ? f.scenario : "--preset " + f.preset);
    if (!f.json_out.empty()) {
        json j = bench::trials_json(trials, best);
        j["slo"] = slo;
        j["strategy"] = f.strategy;
        j["wall_s"] = wall;
        j["serve_args"] = f.serve_args;
        std::ofstream(f.json_out) << j.dump(2) << "\n";
    }
    if (!f.html_out.empty()) std::ofstream(f.html_out) << bench::trials_html(trials, best, title);
    if (best < 0) {
        std::printf("no configuration met the SLO %s; no config file written\n", f.slo.c_str());
        return 1;
    }
    const bench::Trial& b = trials[size_t(best)];
    const std::string comment = fmt::format(
        "Written by {}\nbest of {} trials: goodput {:.2f} req/s ({:.2f} per GPU), "
        "p99 TTFT {:.0f} ms, p99 TPOT {:.1f} ms\nUse: pagoda serve --config THIS_FILE",
        title, trials.size(), b.goodput_rps, b.goodput_per_gpu, b.p99_ttft_ms, b.p99_tpot_ms);
    std::ofstream(f.output) << bench::config_toml(base_flags(f.serve_args), *knobs, b.config,
                                                  comment);
    std::printf("best: trial %d, %s; config written to %s\n", b.index,
                bench::config_label(b.config).c_str(), f.output.c_str());
    return 0;
}

}  // namespace

void add_tune(CLI::App& app, std::function<int()>& action) {
    auto f = std::make_shared<TuneFlags>();
    CLI::App* c = app.add_subcommand(
        "tune",
        "Search max_num_seqs, max_num_batched_tokens, block_size and tensor_parallel_size for "
        "the highest goodput that meets an SLO, running pagoda bench against short-lived "
        "replicas (pagoda serve with the flags after --, e.g. -- --backend sim --sim-gpu "
        "a100-80g --sim-model llama-3-8b); writes the winner as a config file");
    c->add_option("--scenario", f->scenario, "Bench scenario file")->check(CLI::ExistingFile);
    c->add_option("--preset", f->preset, "Bench preset: " + bench::preset_help());
    c->add_option("--scale", f->scale, "Bench --scale of the scenario's rates and lengths");
    c->add_option("--duration", f->duration, "Bench --duration of each trial")
        ->capture_default_str();
    c->add_option("--slo", f->slo,
                  "Criteria every trial must meet, comma-separated, e.g. "
                  "\"p99_ttft_ms<500,p99_tpot_ms<50\"")
        ->required();
    c->add_option("--search", f->search,
                  "Knobs to search, comma-separated, each with default values or NAME=V1:V2:..: "
                  "max_num_seqs (16..512), max_num_batched_tokens (512..8192), block_size "
                  "(8, 16, 32), tensor_parallel_size (1, 2, 4, 8)")
        ->required();
    c->add_option("--strategy", f->strategy,
                  "grid: every combination; coordinate: one knob at a time, in --search order, "
                  "from the serve defaults, until nothing improves (far fewer trials; put the "
                  "knob that matters most first)")
        ->capture_default_str();
    c->add_option("--max-trials", f->max_trials, "Stop after this many trials")
        ->capture_default_str()
        ->check(CLI::Range(1, 10000));
    c->add_option("--max-time", f->max_time,
                  "Start no trial after this long (e.g. 9m); the best so far wins");
    c->add_option("--port", f->port,
                  "First loopback port of the replicas (trial N uses PORT + N % 50; 0: any free "
                  "port)")
        ->capture_default_str();
    c->add_option("--json", f->json_out, "Write the trial table as JSON");
    c->add_option("--html", f->html_out, "Write the trial table as a self-contained HTML page");
    c->add_option("-o,--output", f->output, "The winning configuration (pagoda serve --config)")
        ->capture_default_str();
    c->add_option(
        "--work-dir", f->work_dir,
        "Where the trials' logs, reports and state go (default: a new /tmp/pagoda-tune-*)");
    c->add_option("serve_args", f->serve_args, "pagoda serve flags of every replica (after --)");
    c->callback([f, &action] { action = [f] { return run_tune(*f); }; });
}

}  // namespace pagoda::app
