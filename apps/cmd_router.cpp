// `pagoda router`: the gateway in front of pools of OpenAI-compatible backends
// (src/router/). Flags build one primary pool; --config reads pools, roles and policies from
// a TOML file. Automatic actions go to the audit log of the state db.
#include <fmt/core.h>
#include <pthread.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "apps/cli_common.h"
#include "apps/commands.h"
#include "apps/router_setup.h"
#include "base/log.h"
#include "control/config/state_db.h"
#include "router/rollout.h"
#include "router/router.h"
#include "router/schedule.h"

namespace pagoda::app {
namespace {

struct RouterFlags {
    std::string config;
    std::vector<std::string> backends, standby, dr;
    std::string host;  // "" = the file's, else 127.0.0.1
    int port = -1;     // -1 = the file's, else 9000
    std::vector<std::string> api_keys, admin_keys;
    bool admin_read_open = false, disable_access_log = false;
    std::string state_dir;
    std::string session_header;     // "" = the file's, else x-session-id
    double health_interval_s = -1;  // < 0 = the file's, else 1
    int max_retries = -1;           // < 0 = the file's, else 2
    ClockFlags clock;
    bool check = false;
};

Result<router::RouterConfig> router_config(const RouterFlags& f) {
    router::RouterConfig c;
    if (!f.config.empty()) {
        PAGODA_ASSIGN_OR_RETURN(c, router::load_router_file(f.config));
    }
    if (!f.session_header.empty()) {
        c.session_header = f.session_header;
        for (auto& ch : c.session_header) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    }
    if (f.health_interval_s >= 0) c.health_interval_s = f.health_interval_s;
    if (f.max_retries >= 0) c.max_retries = f.max_retries;
    auto add = [&](const char* name, router::PoolRole role, const std::vector<std::string>& urls) {
        if (urls.empty()) return;
        router::PoolConfig p;
        p.name = name;
        p.role = role;
        p.backends = urls;
        c.pools.push_back(std::move(p));
    };
    add("primary", router::PoolRole::kPrimary, f.backends);
    add("standby", router::PoolRole::kStandby, f.standby);
    add("dr", router::PoolRole::kDr, f.dr);
    if (!f.config.empty() && !(f.backends.empty() && f.standby.empty() && f.dr.empty())) {
        return make_error(ErrorCode::kInvalidArgument,
                          "give pools in --config or with --backend/--standby/--dr, not both");
    }
    if (!f.host.empty()) c.host = f.host;
    if (f.port >= 0) c.port = f.port;
    if (!f.api_keys.empty()) c.api_keys = f.api_keys;
    if (!f.admin_keys.empty()) c.admin_api_keys = f.admin_keys;
    if (f.admin_read_open) c.admin_read_open = true;
    if (f.disable_access_log) c.access_log = false;
    // Keys from the environment (a Kubernetes Secret), for those the flags and file left unset.
    const auto env = [](const char* name) -> std::string {
        const char* v = std::getenv(name);
        return v != nullptr ? v : "";
    };
    if (c.admin_api_keys.empty() && !env("PAGODA_ADMIN_API_KEY").empty()) {
        c.admin_api_keys = {env("PAGODA_ADMIN_API_KEY")};
    }
    if (c.api_keys.empty() && !env("PAGODA_API_KEY").empty()) c.api_keys = {env("PAGODA_API_KEY")};
    if (c.backend_admin_key.empty()) c.backend_admin_key = env("PAGODA_BACKEND_ADMIN_KEY");
    if (!f.state_dir.empty()) c.state_dir = f.state_dir;
    PAGODA_TRY(router::validate(c));
    return c;
}

}  // namespace

// The audit hook: every automatic action of the router, in the state db.
Result<router::RouterHooks> audit_hooks(const std::string& state_dir) {
    PAGODA_ASSIGN_OR_RETURN(
        auto db, control::StateDb::open(state_dir.empty() ? control::default_state_dir() + "/router"
                                                          : state_dir));
    auto shared = std::shared_ptr<control::StateDb>(std::move(db));
    auto mu = std::make_shared<std::mutex>();
    router::RouterHooks h;
    h.audit = [shared, mu](const std::string& kind, const nlohmann::json& detail) {
        std::lock_guard lock(*mu);
        const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
        auto s = shared->record_event(kind, detail, now);
        if (!s) log_warn("router_audit error=\"{}\"", s.error().message);
    };
    h.events = [shared, mu](const std::string& kind, int limit) {
        std::lock_guard lock(*mu);
        return shared->events(kind, limit);
    };
    return h;
}

Result<std::unique_ptr<router::TrafficController>> traffic_controller(
    const ClockFlags& f, const router::RouterConfig& cfg, router::Router& r,
    router::ControllerOptions extra) {
    PAGODA_ASSIGN_OR_RETURN(router::ControllerOptions o, router::controller_options(cfg));
    o.prewarm = std::move(extra.prewarm);
    o.on_verdict = std::move(extra.on_verdict);
    o.clock_scale = f.clock_scale;
    o.dry_run = f.dry_run;
    if (!f.clock_start.empty()) {
        PAGODA_ASSIGN_OR_RETURN(int minute, router::parse_hhmm(f.clock_start));
        const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
        o.clock_start = router::today_at(cfg.schedule_time_zone, minute, now);
    }
    return std::make_unique<router::TrafficController>(r, std::move(o));
}

namespace {

int run_router(const RouterFlags& f) {
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    auto cfg = router_config(f);
    if (!cfg) return fail(cfg.error());
    if (f.check) {
        if (auto o = router::controller_options(*cfg); !o) return fail(o.error());
        std::printf("ok: %zu pools, %zu schedule entries\n", cfg->pools.size(),
                    cfg->schedule.size());
        return 0;
    }
    auto hooks = audit_hooks(cfg->state_dir);
    if (!hooks) return fail(hooks.error());
    auto r = router::Router::start(*cfg, std::move(*hooks));
    if (!r) return fail(r.error());
    auto ctl = traffic_controller(f.clock, *cfg, **r);
    if (!ctl) return fail(ctl.error());
    (*ctl)->start();
    size_t backends = 0;
    for (const auto& p : cfg->pools) backends += p.backends.size();
    log_info("router_listening url=http://{}:{} pools={} static_backends={}", cfg->host,
             (*r)->port(), cfg->pools.size(), backends);
    int sig = 0;
    sigwait(&sigs, &sig);
    log_info("router_stopping signal={}", sig);
    (*ctl)->stop();
    (*r)->stop();
    return 0;
}

}  // namespace

void add_router(CLI::App& app, std::function<int()>& action) {
    auto f = std::make_shared<RouterFlags>();
    CLI::App* c = app.add_subcommand(
        "router",
        "Route OpenAI-compatible traffic over pools of backends (Pagoda, vLLM, llama.cpp): "
        "load-aware balancing, prefix affinity, failover with stream resumption, standby and "
        "DR pools, traffic weights for rollouts and canaries");
    c->add_option("--config", f->config,
                  "TOML file with a [router] table: pools (name, role, backends | backends_file | "
                  "dns, weight) and policies (docs/router.md)");
    c->add_option("--backend", f->backends, "Backend base URL of the primary pool (repeatable)");
    c->add_option("--standby", f->standby,
                  "Backend of the standby pool, used when no primary backend is available "
                  "(repeatable)");
    c->add_option("--dr", f->dr,
                  "Backend of the disaster-recovery pool, used when no other pool is available "
                  "or POST /admin/dr says so (repeatable)");
    c->add_option("--host", f->host, "Address to listen on (default 127.0.0.1, or the file's)");
    c->add_option("--port", f->port, "Port to listen on (default 9000, or the file's; 0: any)")
        ->check(CLI::Range(0, 65535));
    c->add_option("--api-key", f->api_keys,
                  "Accept only requests with this bearer key (repeatable)");
    c->add_option("--admin-api-key", f->admin_keys,
                  "Key for /admin/* (without one, admin answers on loopback only; also "
                  "PAGODA_ADMIN_API_KEY, and PAGODA_API_KEY, PAGODA_BACKEND_ADMIN_KEY for the "
                  "others)");
    c->add_flag("--disable-access-log", f->disable_access_log,
                "No `access` log line per request (id, route, status, tokens, TTFT, total, "
                "finish reason, replica, pool); TOML: access_log = false");
    c->add_flag("--admin-read-open", f->admin_read_open,
                "Let GET /admin/* answer without the admin key (the console's read-only view at "
                "/ui; changes still need the key); TOML: admin_read_open");
    c->add_option("--state-dir", f->state_dir,
                  "Directory of the state db that records the audit log (GET /admin/events); "
                  "one process a directory (default $XDG_STATE_HOME/pagoda/router)");
    c->add_option("--session-header", f->session_header,
                  "Requests with the same value of this header go to the same backend "
                  "(default x-session-id)");
    c->add_option("--health-interval", f->health_interval_s,
                  "Seconds between active checks of /ready and /metrics (default 1)")
        ->check(CLI::Range(0.05, 3600.0));
    c->add_option("--max-retries", f->max_retries,
                  "Other backends tried before the first byte reaches the client (default 2)")
        ->check(CLI::Range(0, 100));
    c->add_option("--schedule-clock-scale", f->clock.clock_scale,
                  "Run the schedule's clock this many times faster than real time (rehearsals: "
                  "60 turns minutes into seconds)")
        ->capture_default_str()
        ->check(CLI::Range(0.001, 1e6));
    c->add_option("--schedule-clock-start", f->clock.clock_start,
                  "Start the schedule's clock at this local time today (HH:MM), for rehearsals");
    c->add_flag("--check", f->check, "Check the configuration and exit (0 when it is valid)");
    c->add_flag("--dry-run", f->clock.dry_run,
                "Record rollout, canary and breaker decisions in the audit log without moving "
                "traffic");
    c->callback([f, &action] { action = [f] { return run_router(*f); }; });
}

}  // namespace pagoda::app
