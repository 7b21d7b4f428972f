// `pagoda serve`: the OpenAI-compatible HTTP server over the batching engine. Loads the
// model, warms up (not ready until then), serves, and on SIGTERM/SIGINT drains: new
// requests get 503, in-flight ones finish (up to --shutdown-timeout), then exit 0.
#include <malloc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "apps/chat_flags.h"
#include "apps/cli_common.h"
#include "apps/commands.h"
#include "apps/config_file.h"
#include "apps/engine_flags.h"
#include "apps/hf_flags.h"
#include "apps/serve_alerting.h"
#include "apps/serve_flags.h"
#include "apps/serve_startup.h"
#include "apps/serve_warm.h"
#include "base/log.h"
#include "control/admin.h"
#include "engine/engine.h"
#include "http/server.h"
#include "kernels/cpu/ops.h"
#include "server/openai_server.h"

namespace pagoda::app {
namespace {

// How the access log names this replica: the host's name (a pod's name in Kubernetes) and
// the port.
std::string replica_name(int port) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    return fmt::format("{}:{}", host[0] != '\0' ? host : "localhost", port);
}

using Clock = std::chrono::steady_clock;

// --backend sim: the model from the performance model of --sim-gpu, and the engine's KV
// pool sized as vLLM sizes it on that card (virtual: nothing is stored).
Result<std::unique_ptr<model::Model>> simulated_model(const ServeFlags& f,
                                                      engine::EngineConfig& cfg) {
    model::SimOptions o;
    o.model = f.sim_model;
    o.vocab_path = default_model_path();
    PAGODA_ASSIGN_OR_RETURN(o.gpu, model::sim::find_gpu(f.sim_gpu, f.sim_gpu_table));
    o.efficiency = o.gpu.efficiency;
    o.tp = f.tensor_parallel_size;
    PAGODA_ASSIGN_OR_RETURN(o.weights, model::sim::parse_weight_type(f.sim_weight_dtype));
    o.kv_dtype = f.engine.kv_dtype == "auto" ? kvcache::KvDtype::kBF16 : cfg.kv.dtype;
    o.speed = f.sim_speed;
    o.eos_probability = f.sim_eos_probability;
    o.seed = f.sim_seed;
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<model::Model> m, model::Model::simulate(o));
    PAGODA_ASSIGN_OR_RETURN(
        model::sim::MemoryPlan plan,
        m->perf_model()->memory(f.gpu_memory_utilization, cfg.sched.knobs.max_num_batched_tokens));
    cfg.kv.dtype = o.kv_dtype;
    cfg.kv.memory_bytes = plan.kv;
    cfg.kv.virtual_memory = true;
    log_info(
        "sim gpu={} model={} tp={} weights_gib={:.1f} activation_gib={:.2f} kv_gib={:.1f} "
        "kv_blocks={} speed={}",
        o.gpu.name, f.sim_model, o.tp, double(plan.weights) / (1 << 30),
        double(plan.activation) / (1 << 30), double(plan.kv) / (1 << 30),
        plan.num_blocks(cfg.kv.block_size), o.speed);
    return m;
}

// "--config FILE", and the file's first comment when `pagoda tune` wrote it.
std::string config_origin(const std::string& file) {
    if (file.empty()) return "";
    std::ifstream in(file);
    std::string first;
    std::getline(in, first);
    const size_t at = first.find("Written by pagoda tune");
    return at == std::string::npos ? "--config " + file
                                   : fmt::format("--config {}, {}", file, first.substr(at));
}

Result<control::ControlOptions> control_options(const ServeFlags& f) {
    control::ControlOptions o;
    o.config.state_dir = f.state_dir.empty() ? control::default_state_dir() : f.state_dir;
    std::error_code ec;
    const auto model_path = std::filesystem::weakly_canonical(f.model, ec);
    o.config.deployment = f.backend == "sim"
                              ? fmt::format("sim gpu={} model={} tp={}", f.sim_gpu, f.sim_model,
                                            f.tensor_parallel_size)
                              : fmt::format("cpu model={}", ec ? f.model : model_path.string());
    auto ms = [](const std::string& flag, const std::string& v) -> Result<int64_t> {
        auto d = parse_duration_ms(v);
        if (!d.ok()) return Error{d.error().code, flag + ": " + d.error().message};
        return d;
    };
    o.config.origin = config_origin(f.config_file);
    PAGODA_ASSIGN_OR_RETURN(const int64_t stable, ms("--stable-window", f.stable_window));
    o.config.stable_window = std::chrono::seconds(std::max<int64_t>(stable / 1000, 1));
    PAGODA_ASSIGN_OR_RETURN(o.policy, control::parse_block_size_policy(f.block_size_policy));
    if (f.backend == "sim" && o.policy == control::BlockSizePolicy::kMeasured) {
        // Its calibration times this machine's CPU kernel, which says nothing of a GPU.
        log_warn(
            "block_size_policy=static reason=\"measured calibrates the CPU kernel; not with "
            "--backend sim\"");
        o.policy = control::BlockSizePolicy::kStatic;
    }
    PAGODA_ASSIGN_OR_RETURN(o.decide_every_ms, ms("--block-size-interval", f.block_size_interval));
    PAGODA_ASSIGN_OR_RETURN(o.cooldown_ms, ms("--block-size-cooldown", f.block_size_cooldown));
    PAGODA_ASSIGN_OR_RETURN(o.recalibrate_every_ms, ms("--recalibrate-every", f.recalibrate_every));
    PAGODA_ASSIGN_OR_RETURN(o.guard.window_ms, ms("--oom-guard-window", f.oom_guard_window));
    o.min_gain = f.block_size_min_gain;
    o.min_samples = f.block_size_min_samples;
    o.guard.free_blocks_fraction = f.oom_guard_free_blocks;
    o.guard.preemptions_per_minute = f.oom_guard_preemptions;
    o.guard.rss_fraction = f.oom_guard_rss_fraction;
    if (f.memory_limit.empty()) {
        o.guard.memory_limit_bytes = control::read_cgroup_memory_limit();
        if (o.guard.memory_limit_bytes == 0 && f.backend != "sim") {
            log_warn(
                "oom_guard rss=off reason=\"no memory limit: no cgroup v2 memory.max and no "
                "--memory-limit; the guard watches free KV blocks and preemptions only (give "
                "--memory-limit 8GiB to watch the resident set too)\"");
        }
    } else {
        auto m = parse_memory(f.memory_limit);
        if (!m.ok()) return Error{m.error().code, "--memory-limit: " + m.error().message};
        o.guard.memory_limit_bytes = *m;
    }
    auto a = control::parse_automation(f.automation);
    if (!a.ok()) return Error{a.error().code, "--automation: " + a.error().message};
    o.automation = *a;
    PAGODA_TRY(apply_warm_flags(f.warm, o));
    return o;
}

// The server's settings from the flags: names, keys, metrics options.
Result<server::ServerConfig> server_config(const ServeFlags& f,
                                           const control::ControlOptions& ctl) {
    server::ServerConfig sc;
    sc.served_model_name = f.served_model_name;
    if (sc.served_model_name.empty()) {
        sc.served_model_name = f.backend == "sim" ? f.sim_model : f.model;
        const size_t slash = sc.served_model_name.find_last_of('/');
        if (slash != std::string::npos)
            sc.served_model_name = sc.served_model_name.substr(slash + 1);
    }
    sc.stream_interval = f.stream_interval;
    sc.api_keys = f.api_keys;
    sc.admin_api_keys = f.admin_api_keys;
    sc.admin_read_open = f.admin_read_open;
    if (const char* k = std::getenv("PAGODA_ADMIN_API_KEY"); k != nullptr && *k != '\0') {
        sc.admin_api_keys.emplace_back(k);
    }
    sc.vllm_metrics = f.vllm_metrics;
    PAGODA_ASSIGN_OR_RETURN(sc.length_classes, length_classes(f.alerts));
    sc.memory_limit_bytes = ctl.guard.memory_limit_bytes;
    PAGODA_ASSIGN_OR_RETURN(sc.memory_bandwidth, memory_bandwidth(f.alerts, f.backend == "sim"));
    return sc;
}

// The rules and their actions, wired to the server once it exists (`api`).
Result<std::unique_ptr<control::Alerting>> make_alerting(const ServeFlags& f, engine::Engine& eng,
                                                         control::ControlPlane& plane,
                                                         const std::string& state_dir,
                                                         std::atomic<server::OpenAiServer*>& api,
                                                         const std::atomic<int>& port) {
    PAGODA_ASSIGN_OR_RETURN(
        auto opts, alerting_options(f.alerts, state_dir, fmt::format("{}:{}", f.host, f.port)));
    control::AlertingWiring w;
    w.metrics_text = [&api] {
        server::OpenAiServer* a = api.load();
        return a != nullptr ? a->metrics_text() : std::string();
    };
    w.slowest_requests = [&api](int n) {
        server::OpenAiServer* a = api.load();
        return a != nullptr ? a->slowest_requests(n) : nlohmann::json::array();
    };
    w.set_shedding = [&api](bool on) {
        if (server::OpenAiServer* a = api.load()) a->set_shedding(on);
    };
    w.automation = [&plane] { return plane.automation(); };
    w.is_instance = [host = f.host, &port](const std::string& instance) {
        return names_this_replica(instance, host, port.load());
    };
    return control::Alerting::create(eng, plane.config(), std::move(opts), std::move(w));
}

// --step-trace FILE: one JSON line per forward pass, {"batch": [[new_tokens, context,
// logits], ...], "ms": duration}, the input of `pagoda sim calibrate --step-trace`.
Result<std::function<void(const model::ForwardBatch&, double)>> open_step_trace(
    const std::string& path) {
    auto out = std::make_shared<std::ofstream>(path, std::ios::trunc);
    if (!*out) return make_error(ErrorCode::kIo, "--step-trace: cannot write {}", path);
    return std::function<void(const model::ForwardBatch&, double)>(
        [out](const model::ForwardBatch& b, double s) {
            std::string line = "{\"batch\": [";
            size_t row = 0;
            for (size_t i = 0; i < b.seqs.size(); ++i) {
                const model::SeqSpan& q = b.seqs[i];
                int logits = 0;
                while (row < b.logits_rows.size() &&
                       b.logits_rows[row] < q.token_start + q.num_tokens) {
                    logits = 1;
                    ++row;
                }
                line +=
                    fmt::format("{}[{}, {}, {}]", i ? ", " : "", q.num_tokens, q.pos_start, logits);
            }
            *out << line << fmt::format("], \"ms\": {:.4f}}}\n", s * 1000);
            out->flush();
        });
}

int run_serve(const ServeFlags& f) {
    // Signals are taken by sigwait below; block them before any thread starts.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);  // reload the alert rules
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    // The engine and HTTP threads allocate and free per step and per request; glibc's
    // defaults (trim at 128 KiB free, grow by 128 KiB) give the heap back and take it again
    // many times a second (an mprotect and fresh zeroed pages each time: ~400 in 15 s of the
    // 50rps preset). Grow in 4 MiB steps and keep up to 32 MiB free instead; what start-up
    // freed is given back once, before the replica is ready.
    mallopt(M_TOP_PAD, 4 << 20);
    mallopt(M_TRIM_THRESHOLD, 32 << 20);

    auto cfg = engine_config(f.engine);
    if (!cfg.ok()) return fail(cfg.error());
    const auto t0 = Clock::now();
    model::LoadOptions load_opts;
    load_opts.hf = f.hf;
    load_opts.hf_cache_dir =
        (f.state_dir.empty() ? control::default_state_dir() : f.state_dir) + "/hf";
    if (!f.no_weight_cache) {
        load_opts.weight_cache_dir =
            !f.weight_cache_dir.empty()
                ? f.weight_cache_dir
                : (f.state_dir.empty() ? control::default_state_dir() : f.state_dir) +
                      "/weight-cache";
    }
    auto m = f.backend == "sim" ? simulated_model(f, *cfg) : model::Model::load(f.model, load_opts);
    if (!m.ok()) {
        fail(m.error());
        return f.backend == "sim" ? 2 : 1;
    }
    if (!f.step_trace.empty()) {
        auto trace = open_step_trace(f.step_trace);
        if (!trace.ok()) return fail(trace.error());
        cfg->on_forward = std::move(*trace);
    }
    const model::WeightCacheReport wc = (**m).weight_cache_report();
    log_info("model_loaded seconds={:.2f} file_gib={:.2f} packed_gib={:.2f} weight_cache={}{}{}",
             std::chrono::duration<double>(Clock::now() - t0).count(),
             double((**m).weights().file_bytes) / double(1 << 30),
             double((**m).weights().packed_bytes) / double(1 << 30),
             model::weight_cache_state_name(wc.state), wc.path.empty() ? "" : " path=" + wc.path,
             wc.note.empty() ? "" : fmt::format(" note=\"{}\"", wc.note));
    auto eng = engine::Engine::create(**m, *cfg);
    if (!eng.ok()) return fail(eng.error());
    auto ctl = control_options(f);
    if (!ctl.ok()) return fail(ctl.error());
    auto scfg = server_config(f, *ctl);
    if (!scfg.ok()) return fail(scfg.error());
    server::ServerConfig& sc = *scfg;
    auto chat_opts = chat_options(f.chat);
    if (!chat_opts.ok()) return fail(chat_opts.error());
    sc.chat = server::ChatTemplate::create((**m).tokenizer().vocab(), std::move(chat_opts).value());
    if (!sc.chat->load_error().empty()) {
        log_error("chat_template unusable=\"{}\"", sc.chat->load_error());
    } else {
        log_info("chat_template renderer=\"{}\"", sc.chat->description());
    }
    if (!f.chat.tool_call_parser.empty()) {
        sc.tool_parser = *server::tool_parser_from_name(f.chat.tool_call_parser);
    }
    log_info("tool_call_parser={}{}",
             server::tool_parser_name(
                 sc.tool_parser.value_or(server::detect_tool_parser(sc.chat->source()))),
             sc.tool_parser        ? ""
             : sc.chat->built_in() ? " (the default: the model has no chat template to detect one "
                                     "from; --tool-call-parser sets it)"
                                   : " (from the chat template)");
    auto plane = control::ControlPlane::open(**eng, *ctl);
    if (!plane.ok()) return fail(plane.error());
    (*plane)->set_full_warmup([e = eng->get(), mm = m->get()]() -> Result<std::string> {
        std::string w = warmup(*e, *mm, true);
        return w + (e->prefault_kv() ? "; KV pool faulted in" : "; KV pool fault-in unsupported");
    });
    // The alerting reads the server's own /metrics: bound once the server exists.
    std::atomic<server::OpenAiServer*> api_ptr{nullptr};
    std::atomic<int> bound_port{f.port};  // the listening port, once known (--port 0)
    auto alerting = make_alerting(f, **eng, **plane, ctl->config.state_dir, api_ptr, bound_port);
    if (!alerting.ok()) return fail(alerting.error());
    std::shared_ptr<control::ControlService> admin =
        control::start_control_service(std::move(plane).value(), std::move(alerting).value());
    sc.admin = admin->routes();
    std::atomic<http::Server*> server_ptr{nullptr};
    sc.open_connections = [&server_ptr] {
        http::Server* s = server_ptr.load();
        return s != nullptr ? s->open_connections() : int64_t(0);
    };
    sc.stream_writes = [&server_ptr] {
        http::Server* s = server_ptr.load();
        return s != nullptr ? s->stream_writes() : int64_t(0);
    };
    server::OpenAiServer api(**eng, sc);
    api_ptr.store(&api);
    http::ServerOptions so;
    so.host = f.host;
    so.port = f.port;
    so.max_body_bytes = f.max_body;
    auto srv = http::Server::start(so, [&api](const http::Request& r) { return api.handle(r); });
    if (srv.ok()) server_ptr.store(srv->get());
    if (!srv.ok()) return fail(srv.error());
    bound_port.store((*srv)->port());
    api.set_access_log(!f.disable_access_log, replica_name((*srv)->port()));
    log_info("listening url=http://{}:{} model={} threads={} simd={} state=warming_up", f.host,
             (*srv)->port(), sc.served_model_name, kernels::cpu::num_threads(),
             kernels::cpu::simd_target_name());
    const auto w0 = Clock::now();
    std::string w = "off";
    int api_ok = 0;
    if (f.warm.warmup != "off") {
        w = warmup(**eng, **m, f.warm.warmup == "full");
        api_ok = warm_api(api);
        if (f.warm.warmup == "full") {
            w += (*eng)->prefault_kv() ? "; KV pool faulted in" : "; KV pool fault-in unsupported";
        }
    }
    (*eng)->take_finished_lengths();  // warmup requests are not traffic
    admin->note_startup_warmup(std::chrono::duration<double>(Clock::now() - w0).count(),
                               f.warm.warmup, api_ok, f.warm.warmup == "off" ? 0 : 4);
    admin->start_ticking();
    malloc_trim(0);  // what loading and warming up freed goes back before traffic starts
    api.set_ready(true);
    log_info("ready seconds={:.2f} warmup=\"{}\" api_requests_ok={}/4",
             std::chrono::duration<double>(Clock::now() - t0).count(), w, api_ok);

    // Serve until SIGTERM/SIGINT or POST /admin/drain, then drain.
    const char* why = "admin_drain";
    for (;;) {
        timespec wait{0, 100 * 1000 * 1000};
        const int sig = sigtimedwait(&sigs, nullptr, &wait);
        if (sig == SIGTERM || sig == SIGINT) {
            why = sig == SIGTERM ? "SIGTERM" : "SIGINT";
            break;
        }
        if (sig == SIGHUP && sc.admin.alerts) {
            const server::AdminReply r = sc.admin.alerts->rules(true);
            log_info("sighup rules_reload status={}", r.status);
        }
        if (api.draining()) break;
    }
    log_info("draining reason={} in_flight={} timeout_s={}", why, api.in_flight(),
             f.shutdown_timeout);
    api.start_drain();
    const auto deadline = Clock::now() + std::chrono::seconds(f.shutdown_timeout);
    while (api.in_flight() > 0 && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const int64_t left = api.in_flight();
    if (left > 0) log_warn("shutdown_timeout cancelled_in_flight={}", left);
    (*srv)->stop_accepting();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let final bytes go out
    (*srv)->stop();
    server_ptr.store(nullptr);
    admin->stop();  // the alerting reads `api`
    api_ptr.store(nullptr);
    (*eng)->shutdown();
    log_info("stopped");
    return left > 0 ? 1 : 0;
}

}  // namespace

void add_serve(CLI::App& app, std::function<int()>& action) {
    auto f = std::make_shared<ServeFlags>();
    CLI::App* c = app.add_subcommand(
        "serve", "Serve the OpenAI-compatible API (completions, chat, models, tokenize, metrics)");
    c->add_option("-m,--model", f->model,
                  "GGUF model file or Hugging Face model directory (default: the bundled model)")
        ->capture_default_str()
        ->check(CLI::ExistingPath);
    add_hf_flags(c, f->hf);
    c->add_option("--host", f->host, "Address to listen on")->capture_default_str();
    c->add_option("--port", f->port, "Port to listen on; 0 = any free port (logged)")
        ->capture_default_str()
        ->check(CLI::Range(0, 65535));
    c->add_option("--api-key", f->api_keys,
                  "Require 'Authorization: Bearer KEY' on /v1 and /tokenize routes (repeatable)");
    c->add_option("--admin-api-key", f->admin_api_keys,
                  "Require 'Authorization: Bearer KEY' on /admin/* (repeatable; also "
                  "PAGODA_ADMIN_API_KEY). Without one, /admin/* answers only on loopback; "
                  "--api-key keys never open it");
    c->add_flag("--disable-access-log", f->disable_access_log,
                "No `access` log line per request (id, route, status, tokens in/out, TTFT, "
                "total, finish reason, replica)");
    c->add_flag("--admin-read-open", f->admin_read_open,
                "Let GET /admin/* answer without the admin key, so the console (/ui) shows "
                "configuration, alerts and the audit log read-only; changes still need the key");
    c->add_option("--step-trace", f->step_trace,
                  "Write every forward pass (each sequence's new tokens, context, and the "
                  "duration) to this JSONL file, for pagoda sim calibrate --step-trace");
    c->add_option("--state-dir", f->state_dir,
                  "Directory of the control state (pagoda.db: config versions; default "
                  "$XDG_STATE_HOME/pagoda, else ~/.local/state/pagoda)");
    c->add_option("--weight-cache-dir", f->weight_cache_dir,
                  "Keep the packed weights in a file here, so the next start maps them instead "
                  "of packing (default <state dir>/weight-cache; one file per model and CPU, "
                  "rebuilt when the model file changes)");
    c->add_flag("--no-weight-cache", f->no_weight_cache,
                "Pack the weights at every start; read and write no weight cache file");
    c->add_option("--stable-window", f->stable_window,
                  "How long a config version must serve without OOM risk before it counts as "
                  "stable (a rollback target): seconds, or 90s, 10m, 1h")
        ->capture_default_str();
    add_control_flags(c, *f);
    add_alert_flags(c, f->alerts);
    add_warm_flags(c, f->warm);
    add_sim_flags(c, *f);
    c->add_option("--served-model-name", f->served_model_name,
                  "Model name in the API (default: the file name)");
    c->add_option("--stream-interval", f->stream_interval,
                  "Tokens a streamed response gathers before each write (vLLM's flag): 1 sends "
                  "every token as it comes; N sends them N at a time, in one chunk, cutting the "
                  "front end's CPU per token; the first token and the end are never held back")
        ->capture_default_str()
        ->check(CLI::Range(1, 1024));
    c->add_option("--shutdown-timeout", f->shutdown_timeout,
                  "Seconds to finish in-flight requests after SIGTERM")
        ->capture_default_str()
        ->check(CLI::Range(0, 86400));
    c->add_flag(
        "--enable-vllm-metrics,!--no-enable-vllm-metrics", f->vllm_metrics,
        "Also publish /metrics under vLLM's vllm:* names for gateways and autoscalers (default on; "
        "off for linters that reject ':' in names, e.g. promtool check metrics)");
    c->add_option("--max-request-body", f->max_body, "Largest request body in bytes (413 above)")
        ->capture_default_str();
    add_engine_flags(c, f->engine);
    add_chat_flags(c, f->chat, true);
    add_config_file_option(c, f->config_file);
    c->add_flag("--dry-run", f->dry_run,
                "Check the flags and --config file, print the engine settings they give (JSON, "
                "the keys of `pagoda config settings`) and exit without loading the model");
    c->callback([c, f, &action] {
        action = [c, f] {
            if (Status st = apply_config_file(c, f->config_file); !st.ok()) return fail(st.error());
            if (f->dry_run) {
                auto j = engine_flags_json(f->engine);
                if (!j.ok()) return fail(j.error());
                (*j)["tensor_parallel_size"] = f->tensor_parallel_size;
                if ((*j)["kv_cache_dtype"] == "auto")  // as the backend resolves it
                    (*j)["kv_cache_dtype"] = f->backend == "sim" ? "bf16" : "f32";
                std::printf("%s\n", j->dump(2).c_str());
                return 0;
            }
            return run_serve(*f);
        };
    });
}

}  // namespace pagoda::app
