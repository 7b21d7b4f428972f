// `pagoda fleet up|down|status|switch|canary|pause|resume|promote|abort|render`: a fleet of
// replicas and its router on one machine (child processes), run from a fleet file
// (fleet_file.h), and the same file rendered for Kubernetes.
#include <fmt/core.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "apps/cli_common.h"
#include "apps/commands.h"
#include "apps/fleet_file.h"
#include "apps/fleet_scaler.h"
#include "apps/fleet_supervisor.h"
#include "apps/router_setup.h"
#include "base/log.h"
#include "bench/baseline.h"
#include "control/config/state_db.h"

namespace pagoda::app {
namespace {

using json = nlohmann::json;

struct FleetFlags {
    std::string file;
    ClockFlags clock;
    std::string pool, profile;
    std::string weight = "5%";
    double percent = 100;
    std::string target = "kubernetes", ns = "default", output, image;
    std::string admin_key;
    int replicas = -1;
    bool automatic = false;
};

std::string state_dir_of(const FleetFile& f) {
    return f.state_dir.empty() ? control::default_state_dir() : f.state_dir;
}
std::string pid_path(const FleetFile& f) {
    return fmt::format("{}/fleet-{}.pid", state_dir_of(f), f.name);
}
AdminTarget router_target(const FleetFile& f, const FleetFlags& fl) {
    return {fmt::format("http://127.0.0.1:{}", f.router.port), fl.admin_key};
}

// A canary's verdict, kept with the bench history (`pagoda bench history` lists it).
void store_verdict(const json& v, const std::string& url) {
    auto store = bench::BaselineStore::open(bench::BaselineStore::default_path());
    if (!store) {
        log_warn("canary_verdict_store error=\"{}\"", store.error().message);
        return;
    }
    bench::RunRow row;
    row.scenario =
        fmt::format("canary {} vs {}", v.value("candidate_pool", ""), v.value("baseline_pool", ""));
    row.url = url;
    row.verdict = v.value("verdict", "");
    row.hardware = bench::hardware_fingerprint();
    row.version = PAGODA_VERSION;
    row.server_json = v.dump();
    for (const char* m : {"ttft", "e2e"}) {
        const json ev = v.value("evidence", json::object()).value(m, json::object());
        for (const char* k : {"baseline_p50_s", "candidate_p50_s", "ratio", "mann_whitney_p"}) {
            if (ev.contains(k)) row.metrics[fmt::format("{}_{}", m, k)] = ev[k].get<double>();
        }
    }
    if (auto id = (*store)->record(row); !id) {
        log_warn("canary_verdict_store error=\"{}\"", id.error().message);
    }
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Every backend of the pool is up and ready (as the router's health checks last saw it).
bool pool_ready(const router::Router& r, const std::string& pool) {
    const json pools = r.pools_json();
    for (const auto& p : pools["pools"]) {
        if (p["name"] != pool) continue;
        if (p["backends"].empty()) return false;
        for (const auto& b : p["backends"]) {
            if (!b["ready"].get<bool>()) return false;
        }
        return true;
    }
    return false;
}

// Pre-warms asked for by the schedule: the pool's replicas start at once; when the router
// sees them all ready, a thread asks each for a full warmup and checks that each reaches
// level full (Router::prewarm_pool, audited with its outcome). status() is the last outcome
// per pool, for /admin/fleet and `fleet status`.
class Prewarms {
  public:
    Prewarms(Supervisor& sup, router::Router& r) : sup_(sup), r_(r) {}
    ~Prewarms() {
        for (auto& t : threads_) t.join();
    }
    void ask(const std::string& pool) {
        sup_.want_pool(pool);
        std::lock_guard lock(mu_);
        asked_[pool] = now_s();
        last_[pool] = {{"outcome", "starting"}};
    }
    void step() {
        std::lock_guard lock(mu_);
        for (auto it = asked_.begin(); it != asked_.end();) {
            if (pool_ready(r_, it->first)) {
                last_[it->first] = {{"outcome", "warming"}};
                threads_.emplace_back([this, pool = it->first] {
                    json d = r_.prewarm_pool(pool);
                    std::lock_guard lock(mu_);
                    last_[pool] = std::move(d);
                });
                it = asked_.erase(it);
            } else if (now_s() - it->second > 300) {
                const json d = {{"pool", it->first},
                                {"outcome", "failed"},
                                {"reason", "the pool's replicas were not ready after 300 s"}};
                log_warn("fleet_prewarm_failed detail={}", d.dump());
                r_.audit("pool_prewarmed", d);
                last_[it->first] = d;
                it = asked_.erase(it);
            } else {
                ++it;
            }
        }
    }
    json status() {
        std::lock_guard lock(mu_);
        return last_;
    }

  private:
    Supervisor& sup_;
    router::Router& r_;
    std::mutex mu_;
    std::map<std::string, double> asked_;  // pool -> when (steady seconds)
    std::map<std::string, json> last_;     // pool -> the last pre-warm's outcome
    std::vector<std::thread> threads_;
};

// Supervises until SIGTERM or SIGINT.
void supervise(const sigset_t& sigs, Supervisor& sup, Prewarms& warms, FleetScaler& scaler) {
    const timespec tick{0, 200'000'000};
    int n = 0;
    for (;;) {
        siginfo_t info{};
        const int sig = sigtimedwait(&sigs, &info, &tick);
        if (sig == SIGTERM || sig == SIGINT) {
            log_info("fleet_stopping signal={}", sig);
            return;
        }
        sup.step();
        warms.step();
        if (++n % 5 == 0) scaler.tick();
    }
}

int run_up(const FleetFlags& fl) {
    sigset_t sigs;
    sigemptyset(&sigs);
    for (int s : {SIGTERM, SIGINT, SIGCHLD}) sigaddset(&sigs, s);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    auto f = load_fleet_file(fl.file);
    if (!f) return fail(f.error());
    const std::string dir = state_dir_of(*f);
    std::error_code ec;
    std::filesystem::create_directories(dir + "/fleet-" + f->name, ec);
    auto audit = audit_hooks(dir);  // takes the state directory's lock
    if (!audit) return fail(audit.error());
    std::ofstream(pid_path(*f)) << getpid() << "\n";
    router::RouterHooks hooks = std::move(*audit);
    Supervisor sup(*f, dir + "/fleet-" + f->name, dir, hooks.audit);
    sup.start();
    auto r = router::Router::start(f->router, hooks);
    if (!r) {
        sup.stop();
        return fail(r.error());
    }
    Prewarms warms(sup, **r);
    router::ControllerOptions extra;
    extra.prewarm = [&warms](const std::string& pool) { warms.ask(pool); };
    const std::string url = fmt::format("http://127.0.0.1:{}", (*r)->port());
    extra.on_verdict = [url](const json& v) { store_verdict(v, url); };
    auto ctl = traffic_controller(fl.clock, f->router, **r, std::move(extra));
    if (!ctl) return fail(ctl.error());
    FleetScaler scaler(*f, sup, **r, fl.clock.dry_run);
    scaler.start();
    (*r)->add_admin_route("/admin/fleet", [&sup, &warms, &scaler](const std::string&, const json&) {
        return std::pair<int, json>{200,
                                    {{"replicas", sup.status()},
                                     {"prewarms", warms.status()},
                                     {"sizing", scaler.status()}}};
    });
    (*r)->add_admin_route("/admin/fleet/scale", [&scaler](const std::string& m, const json& b) {
        return scaler.admin(m, b);
    });
    (*ctl)->start();
    log_info("fleet_up name={} router={} replicas={} state={}", f->name, url, sup.status().size(),
             dir);
    supervise(sigs, sup, warms, scaler);
    (*ctl)->stop();
    sup.stop();
    (*r)->stop();
    std::filesystem::remove(pid_path(*f), ec);
    return 0;
}

int run_down(const FleetFlags& fl) {
    auto f = load_fleet_file(fl.file);
    if (!f) return fail(f.error());
    std::ifstream in(pid_path(*f));
    pid_t pid = 0;
    if (!(in >> pid) || pid <= 0) {
        return fail(Error{
            ErrorCode::kNotFound,
            fmt::format("no fleet '{}' is running here ({} is missing)", f->name, pid_path(*f))});
    }
    if (kill(pid, SIGTERM) != 0) {
        return fail(Error{ErrorCode::kNotFound,
                          fmt::format("fleet '{}' (pid {}) is not running", f->name, pid)});
    }
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(int64_t(f->drain_timeout_s) + 30);
    while (kill(pid, 0) == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::printf("fleet '%s' stopped\n", f->name.c_str());
    return 0;
}

int post_rollout(const FleetFlags& fl, json body) {
    auto f = load_fleet_file(fl.file);
    if (!f) return fail(f.error());
    body["reason"] = body.value("reason", "pagoda fleet");
    return admin_request(router_target(*f, fl), "POST", "/admin/rollout", body.dump());
}

int run_status(const FleetFlags& fl) {
    auto f = load_fleet_file(fl.file);
    if (!f) return fail(f.error());
    const AdminTarget t = router_target(*f, fl);
    int rc = admin_request(t, "GET", "/admin/rollout", "");
    rc |= admin_request(t, "GET", "/admin/pools", "");
    return rc | admin_request(t, "GET", "/admin/fleet", "");
}

int run_canary(const FleetFlags& fl) {
    auto f = load_fleet_file(fl.file);
    if (!f) return fail(f.error());
    std::string pool = fl.pool;
    if (pool.empty()) {
        for (const auto& p : f->router.pools) {
            if (p.profile == fl.profile && p.role == router::PoolRole::kPrimary) pool = p.name;
        }
    }
    if (pool.empty()) {
        return fail(Error{ErrorCode::kInvalidArgument,
                          fmt::format("no primary pool runs profile '{}': give --pool or a "
                                      "profile a pool uses",
                                      fl.profile)});
    }
    std::string w = fl.weight;
    if (!w.empty() && w.back() == '%') w.pop_back();
    char* end = nullptr;
    const double pct = std::strtod(w.c_str(), &end);
    if (w.empty() || *end != '\0') {
        return fail(Error{ErrorCode::kInvalidArgument,
                          fmt::format("--weight '{}' is not a percentage such as 5%", fl.weight)});
    }
    return post_rollout(fl, {{"action", "canary"}, {"pool", pool}, {"percent", pct}});
}

int run_render(const FleetFlags& fl) {
    if (fl.target != "kubernetes") {
        return fail(Error{ErrorCode::kInvalidArgument,
                          fmt::format("--target '{}': only kubernetes is supported", fl.target)});
    }
    auto f = load_fleet_file(fl.file);
    if (!f) return fail(f.error());
    if (!fl.image.empty()) f->image = fl.image;
    const std::string y = render_kubernetes(*f, fl.ns);
    if (fl.output.empty() || fl.output == "-") {
        std::fwrite(y.data(), 1, y.size(), stdout);
        return 0;
    }
    std::ofstream out(fl.output);
    out << y;
    if (!out) return fail(Error{ErrorCode::kIo, fmt::format("cannot write {}", fl.output)});
    return 0;
}

CLI::App* sub(CLI::App* fleet, const std::shared_ptr<FleetFlags>& f, const char* name,
              const char* help) {
    CLI::App* c = fleet->add_subcommand(name, help);
    c->add_option("file", f->file, "Fleet file (TOML; docs/router.md)")->required();
    return c;
}

}  // namespace

void add_fleet(CLI::App& app, std::function<int()>& action) {
    auto f = std::make_shared<FleetFlags>();
    CLI::App* fleet = app.add_subcommand(
        "fleet",
        "Run a fleet on this machine (replicas per pool and profile, the router, "
        "schedules) or render it for Kubernetes");
    fleet->require_subcommand(1);
    fleet->add_option("--admin-api-key", f->admin_key, "The router's admin key, if it has one");
    CLI::App* up = sub(fleet, f, "up",
                       "Start the replicas and the router, supervise them (restart with "
                       "backoff) and run the schedules until SIGTERM or `fleet down`");
    up->add_option("--schedule-clock-scale", f->clock.clock_scale,
                   "Run the schedule's clock this many times faster (rehearsals)")
        ->check(CLI::Range(0.001, 1e6));
    up->add_option("--schedule-clock-start", f->clock.clock_start,
                   "Start the schedule's clock at this local time today (HH:MM)");
    up->add_flag("--dry-run", f->clock.dry_run,
                 "Record rollout and pool-sizing decisions without moving traffic or replicas");
    up->callback([f, &action] { action = [f] { return run_up(*f); }; });
    sub(fleet, f, "down", "Stop a fleet started with `fleet up` (replicas drain first)")
        ->callback([f, &action] { action = [f] { return run_down(*f); }; });
    sub(fleet, f, "status", "Where the rollout stands, the pools and the replicas")
        ->callback([f, &action] { action = [f] { return run_status(*f); }; });
    CLI::App* sw =
        sub(fleet, f, "switch", "Shift traffic to a pool (progressive, with the breaker)");
    sw->add_option("--to", f->pool, "The pool to shift to")->required();
    sw->add_option("--percent", f->percent, "Its share of the traffic")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 100.0));
    sw->callback([f, &action] {
        action = [f] {
            return post_rollout(*f,
                                {{"action", "shift"}, {"pool", f->pool}, {"percent", f->percent}});
        };
    });
    CLI::App* ca = sub(fleet, f, "canary",
                       "Send a share of traffic to a candidate pool and let the judge promote or "
                       "roll it back");
    ca->add_option("--profile", f->profile, "The candidate profile (the pool that runs it)");
    ca->add_option("--pool", f->pool, "The candidate pool (instead of --profile)");
    ca->add_option("--weight", f->weight, "The candidate's share, as 5%")->capture_default_str();
    ca->callback([f, &action] { action = [f] { return run_canary(*f); }; });
    const std::pair<const char*, const char*> hand[] = {
        {"pause", "Pause the running switch or canary: weights hold (audited)"},
        {"resume", "Resume a paused or rolled-back switch (audited)"},
        {"promote", "Give the target or candidate pool all the traffic now (audited)"},
        {"abort", "Put the weights back as they were before the switch or canary (audited)"}};
    for (const auto& [a, help] : hand) {
        const std::string act = a;
        sub(fleet, f, a, help)->callback([f, &action, act] {
            action = [f, act] { return post_rollout(*f, {{"action", act}}); };
        });
    }
    CLI::App* sc = sub(fleet, f, "scale",
                       "Set a sized pool's replica count by hand (pauses its automatic sizing; "
                       "a replica that leaves is taken out of routing, then drains), or --auto");
    sc->add_option("--pool", f->pool, "The pool (one with max_replicas)")->required();
    sc->add_option("--replicas", f->replicas, "Replicas to run (0 to max_replicas)");
    sc->add_flag("--auto", f->automatic, "Hand the pool back to automatic sizing");
    sc->callback([f, &action] {
        action = [f] {
            if ((f->replicas < 0) == !f->automatic) {
                return fail(Error{ErrorCode::kInvalidArgument, "give --replicas N or --auto"});
            }
            auto ff = load_fleet_file(f->file);
            if (!ff) return fail(ff.error());
            json b = {{"pool", f->pool}};
            if (f->automatic) {
                b["auto"] = true;
            } else {
                b["replicas"] = f->replicas;
            }
            return admin_request(router_target(*ff, *f), "POST", "/admin/fleet/scale", b.dump());
        };
    });
    CLI::App* re = sub(fleet, f, "render", "Write the fleet as Kubernetes manifests (YAML)");
    re->add_option("--target", f->target, "kubernetes")->capture_default_str();
    re->add_option("--namespace", f->ns, "Namespace of the objects")->capture_default_str();
    re->add_option("-o,--output", f->output, "File to write (default: stdout)");
    re->add_option("--image", f->image,
                   "Container image of the replicas and the router (default: the file's "
                   "[fleet] image, else pagoda:" PAGODA_VERSION ")");
    re->callback([f, &action] { action = [f] { return run_render(*f); }; });
}

}  // namespace pagoda::app
