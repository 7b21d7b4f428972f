// `pagoda check`: the pre-deployment checklist against a live replica (--url) or a fleet
// (--fleet FILE: its router and every replica the router routes to). Six items, each with
// the evidence that decided it and, on a miss, what to do:
//   1. sizing      batch, TP and token cap sized: the running settings came from `pagoda
//                  tune` (a startup version's reason, or a change whose reason names tune),
//                  or a baseline was recorded against this target
//   2. block_size  the block size chosen from observed lengths: an adaptive policy that has
//                  decided, on at least its minimum of observed requests
//   3. warmup      warmup before ready configured, and the last start's warmup answered all
//                  its API requests
//   4. monitoring  alert rules loaded, the three layers' series exported (resources,
//                  scheduler stages, SLOs), and Prometheus scraping the target (--prometheus,
//                  or the fleet's prometheus_url) with Pagoda's rules loaded
//   5. fallback    a stable configuration version to roll back to, and a standby or DR pool
//                  (fleet) or a severe/redeploy hook (replica)
//   6. baseline    the newest bench run against the target within --tolerance of its baseline
// Exit 0 when all pass, 1 on a miss, 2 when the target cannot be reached at all.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "apps/cli_common.h"
#include "apps/commands.h"
#include "apps/fleet_file.h"
#include "bench/baseline.h"
#include "bench/stats.h"
#include "http/client.h"

namespace pagoda::app {
namespace {

using json = nlohmann::json;

struct CheckFlags {
    std::string url, fleet, admin_key, prometheus, db, baseline;
    double tolerance = 0.10;
    bool json_out = false;
};

struct Item {
    std::string name, title;
    bool ok = false;
    std::string evidence, fix;
};

// GET `path` on `base`; the body as JSON (null when it is not), the status (0: unreachable).
struct Got {
    int status = 0;
    json body;
    std::string text, error;
};

Got get(const std::string& base, const std::string& path, const std::string& key = "") {
    Got g;
    http::ClientOptions o;
    if (!key.empty()) o.headers.emplace_back("Authorization", "Bearer " + key);
    auto client = http::Client::create(base, o);
    if (!client.ok()) {
        g.error = client.error().message;
        return g;
    }
    http::ClientRequest r;
    r.method = "GET";
    r.path = path;
    auto resp = (*client)->fetch(r);
    if (!resp.ok()) {
        g.error = resp.error().message;
        return g;
    }
    g.status = resp->status;
    g.text = resp->body;
    g.body = json::parse(resp->body, nullptr, false);
    if (g.body.is_discarded()) g.body = nullptr;
    return g;
}

struct Target {
    std::string router;                 // fleet only
    std::vector<std::string> replicas;  // URLs
    std::vector<std::string> roles;     // pool roles the router has (fleet)
    std::string key, backend_key, prometheus;
    std::string bench_url;  // where bench runs were recorded against
};

// The evidence of every replica for one item, folded into one line.
Item fold(std::string name, std::string title, const std::vector<Item>& per_replica,
          const Target& t) {
    Item out{std::move(name), std::move(title), true, "", ""};
    for (size_t i = 0; i < per_replica.size(); ++i) {
        const Item& r = per_replica[i];
        out.ok = out.ok && r.ok;
        if (!out.evidence.empty()) out.evidence += "; ";
        out.evidence += (per_replica.size() > 1 ? t.replicas[i] + ": " : "") + r.evidence;
        if (!r.ok && out.fix.empty()) out.fix = r.fix;
    }
    return out;
}

Item sizing(const std::string& url, const std::string& key, bool has_baseline) {
    Item it{"sizing", "batch, TP and token cap sized", false, "", ""};
    const Got h = get(url, "/admin/config/history?limit=200", key);
    if (h.status != 200) {
        it.evidence = fmt::format("GET /admin/config/history: {}", h.status ? h.text : h.error);
        return it;
    }
    const json& cur = get(url, "/admin/config", key).body;
    for (const auto& v : h.body.value("versions", json::array())) {
        const std::string why = v.value("reason", "");
        if (why.find("pagoda tune") != std::string::npos || v.value("source", "") == "tune") {
            it.ok = true;
            it.evidence = fmt::format("v{} from pagoda tune ({})", v.value("id", 0), why);
        }
    }
    if (!it.ok && has_baseline) {
        it.ok = true;
        it.evidence = "a recorded baseline measured these settings";
    }
    if (cur.is_object()) {
        const json& val = cur.value("value", json::object());
        it.evidence += fmt::format("{}max_num_seqs={} max_num_batched_tokens={} ({})",
                                   it.evidence.empty() ? "" : "; ", val.value("max_num_seqs", 0),
                                   val.value("max_num_batched_tokens", 0),
                                   cur.value("deployment", std::string("?")));
    }
    if (!it.ok) {
        it.fix =
            "run pagoda tune and start with --config pagoda-tuned.toml, or record a baseline "
            "(pagoda bench --save-baseline NAME)";
    }
    return it;
}

Item block_size(const std::string& url, const std::string& key) {
    Item it{"block_size", "block size chosen from observed lengths", false, "", ""};
    const Got g = get(url, "/admin/block-size", key);
    if (g.status != 200 || !g.body.is_object()) {
        it.evidence = "GET /admin/block-size: " + (g.status ? g.text : g.error);
        return it;
    }
    const json& b = g.body;
    const std::string policy = b.value("policy", "?");
    const int64_t n = b.value("lengths", json::object()).value("count", int64_t(0));
    const int64_t need = b.value("min_samples", int64_t(0));
    const bool decided = b.contains("last_decision") && !b["last_decision"].is_null();
    it.ok = policy != "static" && decided && n >= need;
    it.evidence =
        fmt::format("policy {}, block size {}, {} requests observed (needs {}), {}", policy,
                    b.value("block_size", 0), n, need, decided ? "decided" : "no decision yet");
    if (!it.ok) {
        it.fix = policy == "static"
                     ? "start with --block-size-policy measured (CPU) or seed"
                     : "serve representative traffic, then POST /admin/block-size/decide";
    }
    return it;
}

Item warmup(const std::string& url, const std::string& key) {
    Item it{"warmup", "warmup configured and the last start's warmup successful", false, "", ""};
    const Got g = get(url, "/admin/warmup", key);
    const json s = g.body.is_object() ? g.body.value("startup", json::object()) : json::object();
    if (s.empty()) {
        it.evidence =
            "GET /admin/warmup: " + (g.status ? std::string("no startup record") : g.error);
        return it;
    }
    it.ok = s.value("ok", false);
    it.evidence = fmt::format(
        "mode {}, {:.2f} s, {}/{} API requests answered; dynamic {}, "
        "predictive {}",
        s.value("mode", "?"), s.value("seconds", 0.0), s.value("api_requests_ok", 0),
        s.value("api_requests", 0), g.body.value("dynamic", false),
        g.body.value("predictive", false));
    if (!it.ok) it.fix = "start with --warmup minimal (or full) and read the 'ready' log line";
    return it;
}

// The three layers' series on /metrics and the rules the replica evaluates.
Item monitoring_replica(const std::string& url, const std::string& key) {
    Item it{"monitoring", "", false, "", ""};
    static const char* kLayers[][2] = {{"resources", "pagoda_memory_usage_perc"},
                                       {"resources", "pagoda_compute_busy_seconds_total"},
                                       {"scheduler", "pagoda_request_stage_seconds_count"},
                                       {"scheduler", "pagoda_num_requests_waiting"},
                                       {"SLOs", "pagoda_time_to_first_token_seconds_count"},
                                       {"SLOs", "pagoda_request_errors_total"}};
    const Got m = get(url, "/metrics");
    std::string missing;
    for (const auto& [layer, name] : kLayers) {
        if (m.text.find(std::string("\n") + name) == std::string::npos) {
            missing += fmt::format(" {} ({})", name, layer);
        }
    }
    const Got r = get(url, "/admin/rules", key);
    const size_t rules = r.body.is_object() ? r.body.value("rules", json::array()).size() : 0;
    it.ok = missing.empty() && rules > 0;
    it.evidence = fmt::format("{} alert rules loaded; the three layers' series {}", rules,
                              missing.empty() ? "exported" : "missing:" + missing);
    if (!it.ok) it.fix = "check --rules and /metrics";
    return it;
}

// Prometheus scrapes every target (up == 1) and has Pagoda's alert rules loaded.
std::string prometheus_check(const Target& t, bool& ok) {
    if (t.prometheus.empty()) {
        ok = false;
        return "no Prometheus to ask (--prometheus URL, or prometheus_url in the fleet file)";
    }
    const Got up = get(t.prometheus, "/api/v1/query?query=up");
    const Got rules = get(t.prometheus, "/api/v1/rules");
    if (up.status != 200 || rules.status != 200) {
        ok = false;
        return fmt::format("Prometheus at {} did not answer ({})", t.prometheus,
                           up.status ? up.text.substr(0, 120) : up.error);
    }
    std::vector<std::string> want = t.replicas;
    if (!t.router.empty()) want.push_back(t.router);
    int seen = 0;
    std::string unseen;
    for (const std::string& u : want) {
        const std::string inst = u.substr(u.find("//") + 2);
        bool hit = false;
        for (const auto& s : up.body["data"].value("result", json::array())) {
            hit |= s["metric"].value("instance", "") == inst && s["value"][1] == "1";
        }
        seen += hit;
        if (!hit) unseen += " " + inst;
    }
    size_t loaded = 0;
    for (const auto& g : rules.body["data"].value("groups", json::array())) {
        for (const auto& r : g.value("rules", json::array())) {
            loaded += r.value("name", "") == "MemoryCritical" || r.value("name", "") == "TTFTHigh";
        }
    }
    ok = unseen.empty() && loaded >= 2;
    return fmt::format("Prometheus scrapes {}/{} targets{}, Pagoda's rules {}", seen, want.size(),
                       unseen.empty() ? "" : " (not:" + unseen + ")",
                       loaded >= 2 ? "loaded" : "not loaded (pagoda rules export)");
}

Item fallback(const Target& t) {
    Item it{"fallback", "fallback in place", true, "", ""};
    int stable = 0;
    bool hooks = false;
    for (const std::string& u : t.replicas) {
        const Got h = get(u, "/admin/config/history?limit=200", t.backend_key);
        bool any = false;
        for (const auto& v :
             h.body.is_object() ? h.body.value("versions", json::array()) : json::array()) {
            any |= v.value("stable", false);
        }
        stable += any;
        const Got a = get(u, "/admin/alerts", t.backend_key);
        if (a.body.is_object() && a.body.contains("hooks")) {
            const json& k = a.body["hooks"];
            hooks |= k.value("severe", false) || k.value("redeploy", false);
        }
    }
    const bool standby = std::any_of(t.roles.begin(), t.roles.end(), [](const std::string& r) {
        return r == "standby" || r == "dr";
    });
    it.ok = stable == int(t.replicas.size()) && (standby || hooks);
    it.evidence = fmt::format("{}/{} replicas have a stable version to roll back to; {}", stable,
                              t.replicas.size(),
                              standby ? "a standby or DR pool"
                              : hooks ? "a severe/redeploy hook"
                                      : "no standby or DR pool and no severe/redeploy hook");
    if (!it.ok) {
        it.fix = stable < int(t.replicas.size())
                     ? "let a version stay up --stable-window without rollback (or shorten it)"
                     : "add a standby or dr pool to the router, or --hook-severe/--hook-redeploy";
    }
    return it;
}

Item baseline(const Target& t, const CheckFlags& f, bool& has_baseline) {
    Item it{"baseline", "performance within the baseline's tolerance", false, "", ""};
    auto store =
        bench::BaselineStore::open(f.db.empty() ? bench::BaselineStore::default_path() : f.db);
    if (!store) {
        it.evidence = store.error().message;
        return it;
    }
    std::vector<bench::RunRow> base;
    std::string name = f.baseline;
    std::vector<std::string> names = {name};
    if (name.empty()) {
        auto all = (*store)->baseline_names();
        names = all ? *all : std::vector<std::string>{};
    }
    for (const std::string& n : names) {
        auto rows = (*store)->baseline(n);
        if (rows && !rows->empty() && (!f.baseline.empty() || (*rows)[0].url == t.bench_url) &&
            (base.empty() || (*rows)[0].created_at > base[0].created_at)) {
            base = *rows;
            name = n;
        }
    }
    has_baseline = !base.empty();
    if (base.empty()) {
        it.evidence = fmt::format("no baseline recorded against {}", t.bench_url);
        it.fix = fmt::format("pagoda bench --url {} ... --save-baseline NAME", t.bench_url);
        return it;
    }
    auto got = (*store)->history(500);
    const std::vector<bench::RunRow> hist = got ? *got : std::vector<bench::RunRow>{};
    const auto cur = std::find_if(hist.begin(), hist.end(), [&](const bench::RunRow& r) {
        return r.baseline.empty() && r.url == base[0].url &&
               r.scenario_hash == base[0].scenario_hash && r.created_at >= base[0].created_at;
    });
    if (cur == hist.end()) {
        it.evidence = fmt::format("baseline '{}' ({}), no run since", name, base[0].created_at);
        it.fix = fmt::format("pagoda bench --url {} ... --compare {}", t.bench_url, name);
        return it;
    }
    std::vector<std::map<std::string, double>> b;
    for (const auto& r : base) b.push_back(r.metrics);
    std::string worst;
    it.ok = true;
    const std::vector<std::map<std::string, double>> now = {cur->metrics};
    for (const auto& d : bench::compare_runs(b, now, f.tolerance)) {
        if (d.verdict == "regression") {
            it.ok = false;
            worst += fmt::format(" {} {:+.1f}%", d.metric, 100 * d.delta_rel);
        }
    }
    it.evidence = fmt::format(
        "run #{} ({}) against baseline '{}': {}", cur->id, cur->created_at, name,
        it.ok ? fmt::format("within {:.0f}%", 100 * f.tolerance) : "regressed:" + worst);
    if (!it.ok) it.fix = "find what changed: pagoda bench history, pagoda config history";
    return it;
}

Result<Target> resolve(const CheckFlags& f) {
    Target t;
    const char* env_key = std::getenv("PAGODA_ADMIN_API_KEY");
    t.key = !f.admin_key.empty() ? f.admin_key : env_key != nullptr ? env_key : "";
    t.prometheus = f.prometheus;
    if (!f.url.empty()) {
        if (const Got h = get(f.url, "/health"); h.status == 0) {
            return make_error(ErrorCode::kNotFound, "{} did not answer: {}", f.url, h.error);
        }
        t.replicas = {f.url};
        t.backend_key = t.key;
        t.bench_url = f.url;
        return t;
    }
    PAGODA_ASSIGN_OR_RETURN(FleetFile ff, load_fleet_file(f.fleet));
    t.router = fmt::format("http://127.0.0.1:{}", ff.router.port);
    t.bench_url = t.router;
    if (t.prometheus.empty()) t.prometheus = ff.prometheus_url;
    t.backend_key = ff.router.backend_admin_key.empty() ? t.key : ff.router.backend_admin_key;
    const Got p = get(t.router, "/admin/pools", t.key);
    if (p.status != 200 || !p.body.is_object()) {
        return make_error(ErrorCode::kNotFound, "fleet '{}': its router at {} did not answer ({})",
                          ff.name, t.router, p.status ? p.text : p.error);
    }
    for (const auto& pool : p.body.value("pools", json::array())) {
        t.roles.push_back(pool.value("role", ""));
        for (const auto& b : pool.value("backends", json::array())) {
            t.replicas.push_back(b.value("url", ""));
        }
    }
    return t;
}

int run_check(const CheckFlags& f) {
    auto t = resolve(f);
    if (!t) {
        fail(t.error());
        return 2;
    }
    if (t->replicas.empty()) {
        fail(Error{ErrorCode::kNotFound, "the router routes to no replica: nothing to check"});
        return 2;
    }
    bool has_baseline = false;
    Item base = baseline(*t, f, has_baseline);
    std::vector<Item> sz, bs, wu, mon;
    for (const std::string& u : t->replicas) {
        sz.push_back(sizing(u, t->backend_key, has_baseline));
        bs.push_back(block_size(u, t->backend_key));
        wu.push_back(warmup(u, t->backend_key));
        mon.push_back(monitoring_replica(u, t->backend_key));
    }
    Item m = fold("monitoring", "monitoring in place", mon, *t);
    bool prom_ok = false;
    m.evidence += "; " + prometheus_check(*t, prom_ok);
    if (!prom_ok) {
        m.ok = false;
        if (m.fix.empty())
            m.fix = "scrape the targets with deploy/prometheus/prometheus.yml and its rules";
    }
    const std::vector<Item> items = {fold("sizing", sz[0].title, sz, *t),
                                     fold("block_size", bs[0].title, bs, *t),
                                     fold("warmup", wu[0].title, wu, *t),
                                     m,
                                     fallback(*t),
                                     base};
    const bool all = std::all_of(items.begin(), items.end(), [](const Item& i) { return i.ok; });
    if (f.json_out) {
        json out = {
            {"target", f.url.empty() ? f.fleet : f.url}, {"ok", all}, {"items", json::array()}};
        for (const Item& i : items) {
            out["items"].push_back({{"name", i.name},
                                    {"title", i.title},
                                    {"ok", i.ok},
                                    {"evidence", i.evidence},
                                    {"fix", i.fix}});
        }
        std::printf("%s\n", out.dump(2).c_str());
    } else {
        for (const Item& i : items) {
            std::printf("%s %-10s %s: %s\n", i.ok ? "ok  " : "MISS", i.name.c_str(),
                        i.title.c_str(), i.evidence.c_str());
            if (!i.ok && !i.fix.empty()) std::printf("                fix: %s\n", i.fix.c_str());
        }
        const auto passed =
            std::count_if(items.begin(), items.end(), [](const Item& i) { return i.ok; });
        std::printf("%zd/%zu items pass\n", passed, items.size());
    }
    return all ? 0 : 1;
}

}  // namespace

void add_check(CLI::App& app, std::function<int()>& action) {
    auto f = std::make_shared<CheckFlags>();
    CLI::App* c = app.add_subcommand(
        "check",
        "The pre-deployment checklist against a live replica (--url) or fleet (--fleet): "
        "sizing, block size, warmup, monitoring, fallback, baseline; one line per item with "
        "its evidence, exit 1 on a miss");
    auto* url = c->add_option("--url", f->url, "A replica's base URL (http://host:port)");
    auto* fleet =
        c->add_option("--fleet", f->fleet, "A fleet file whose fleet is up (pagoda fleet up)")
            ->check(CLI::ExistingFile);
    url->excludes(fleet);
    c->add_option("--admin-api-key", f->admin_key,
                  "Admin key of the replica or the fleet's router (also PAGODA_ADMIN_API_KEY)");
    c->add_option("--prometheus", f->prometheus,
                  "Prometheus that scrapes the target (default for --fleet: the file's "
                  "prometheus_url)");
    c->add_option("--db", f->db, "Bench baseline store (default: pagoda bench's)");
    c->add_option("--baseline", f->baseline,
                  "Baseline name (default: the newest recorded against the target)");
    c->add_option("--tolerance", f->tolerance, "Allowed relative change from the baseline")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    c->add_flag("--json", f->json_out, "One JSON object instead of lines");
    c->callback([f, &action] {
        action = [f] {
            if (f->url.empty() && f->fleet.empty()) {
                return fail(Error{ErrorCode::kInvalidArgument, "give --url URL or --fleet FILE"});
            }
            return run_check(*f);
        };
    });
}

}  // namespace pagoda::app
