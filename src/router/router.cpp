// The router's HTTP front: routes, keys, admin API, and the Router handle (router.h).
#include "router/router.h"

#include <fmt/format.h>

#include <chrono>
#include <future>
#include <thread>

#include "base/log.h"
#include "router/router_core.h"
#include "ui/ui.h"

namespace pagoda::router {

using json = nlohmann::json;

namespace {

http::Response json_reply(int status, const json& body) {
    http::Response r;
    r.status = status;
    r.body = body.dump();
    return r;
}

http::Response api_error(int status, const std::string& msg, const std::string& type) {
    return json_reply(
        status,
        {{"error", {{"message", msg}, {"type", type}, {"param", nullptr}, {"code", status}}}});
}

bool key_matches(std::string_view given, const std::vector<std::string>& keys) {
    bool ok = false;
    for (const auto& k : keys) {
        if (k.size() != given.size()) continue;
        unsigned diff = 0;
        for (size_t i = 0; i < k.size(); ++i) diff |= unsigned(k[i] ^ given[i]);
        ok = ok || diff == 0;
    }
    return ok;
}

std::string_view bearer(const http::Request& req) {
    std::string_view a = req.header("authorization");
    if (a.starts_with("Bearer ")) a.remove_prefix(7);
    return a;
}

bool loopback(const http::Request& req) {
    return req.remote.starts_with("127.") || req.remote == "::1" ||
           req.remote.starts_with("::ffff:127.");
}

// The text that prefix affinity hashes: the prompt, or the chat messages' contents, cut to
// `chars` characters.
std::string prefix_text(const json& body, bool chat, int chars) {
    std::string s;
    if (chat) {
        if (auto m = body.find("messages"); m != body.end() && m->is_array()) {
            for (const auto& msg : *m) {
                if (!msg.is_object()) continue;
                auto c = msg.find("content");
                s += c != msg.end() && c->is_string() ? c->get<std::string>() : json(msg).dump();
                s += '\n';
                if (int(s.size()) >= chars) break;
            }
        }
    } else if (auto p = body.find("prompt"); p != body.end()) {
        s = p->is_string() ? p->get<std::string>() : p->dump();
    }
    if (int(s.size()) > chars) s.resize(size_t(chars));
    return s;
}

Result<CallInput> generation_input(const Core& core, const http::Request& req, bool chat) {
    CallInput in;
    in.method = req.method;
    in.path = req.path;
    in.raw_body = req.body;
    in.generation = true;
    in.chat = chat;
    in.content_type = "application/json";
    in.body = json::parse(req.body, nullptr, false);
    if (in.body.is_discarded() || !in.body.is_object()) {
        return make_error(ErrorCode::kInvalidArgument, "the body is not a JSON object");
    }
    const json& b = in.body;
    in.stream = b.value("stream", false) == true;
    if (auto so = b.find("stream_options"); so != b.end() && so->is_object()) {
        in.client_usage = so->value("include_usage", false) == true;
    }
    in.client_token_ids = b.value("return_token_ids", false) == true;
    if (auto n = b.find("n"); n != b.end() && n->is_number_integer()) in.n = n->get<int>();
    for (const char* k : {"max_tokens", "max_completion_tokens"}) {
        if (auto m = b.find(k); m != b.end() && m->is_number_integer()) {
            in.max_tokens = m->get<int64_t>();
        }
    }
    const std::string session(req.header(core.cfg.session_header));
    if (!session.empty()) in.key.session = hash64(session);
    if (core.cfg.affinity_prefix_chars > 0) {
        const std::string p = prefix_text(b, chat, core.cfg.affinity_prefix_chars);
        if (!p.empty()) in.key.prefix = hash64(p);
    }
    in.key.draw =
        in.key.session != 0
            ? double(mix64(in.key.session) >> 11) * 0x1.0p-53
            : double(mix64(uint64_t(core.now_s() * 1e9) ^ uint64_t(&in)) >> 11) * 0x1.0p-53;
    return in;
}

http::Reply proxy(const std::shared_ptr<Core>& core, CallInput in) {
    return http::Reply::later(
        [core, in = std::move(in)](std::shared_ptr<http::Responder> r) mutable {
            start_proxy(core, std::move(in), std::move(r));
        });
}

// The value of `name` in the request's query string ("" when absent; no %-decoding: kinds
// and numbers need none).
std::string query_param(const http::Request& req, const std::string& name) {
    const size_t q = req.target.find('?');
    if (q == std::string::npos) return "";
    std::string_view rest(req.target);
    rest.remove_prefix(q + 1);
    while (!rest.empty()) {
        const size_t amp = rest.find('&');
        const std::string_view kv = rest.substr(0, amp);
        if (kv.starts_with(name + "=")) return std::string(kv.substr(name.size() + 1));
        if (amp == std::string_view::npos) break;
        rest.remove_prefix(amp + 1);
    }
    return "";
}

// GET /admin/events?kind=K&limit=N (as a replica's): the router's audit log.
http::Response events_reply(const Core& core, const http::Request& req) {
    if (!core.hooks.events) {
        return api_error(404, "this router keeps no audit log (no state directory)",
                         "not_found_error");
    }
    const std::string l = query_param(req, "limit");
    char* end = nullptr;
    const long limit = l.empty() ? 100 : std::strtol(l.c_str(), &end, 10);
    if (!l.empty() && (*end != '\0' || limit < 1 || limit > 10000)) {
        return api_error(400, "limit must be an integer in [1, 10000] (got '" + l + "')",
                         "invalid_request_error");
    }
    auto ev = core.hooks.events(query_param(req, "kind"), int(limit));
    if (!ev) return api_error(500, ev.error().message, "server_error");
    return json_reply(200, {{"events", *ev}});
}

// The bearer header of the router's admin calls to backends (none without a key).
std::vector<std::pair<std::string, std::string>> admin_headers(const std::string& key) {
    if (key.empty()) return {};
    return {{"Authorization", "Bearer " + key}};
}

// "host:port" of a backend URL ("http://127.0.0.1:8001" -> "127.0.0.1:8001").
std::string host_port(const std::string& url) {
    std::string_view u(url);
    if (const size_t p = u.find("://"); p != std::string_view::npos) u.remove_prefix(p + 3);
    return std::string(u.substr(0, u.find('/')));
}

bool same_instance(const std::string& a, const std::string& b) {
    if (a == b) return true;
    const size_t ca = a.rfind(':'), cb = b.rfind(':');
    if (ca == std::string::npos || cb == std::string::npos) return false;
    if (a.substr(ca) != b.substr(cb)) return false;
    auto loop = [](std::string_view h) { return h == "localhost" || h.starts_with("127."); };
    return loop(std::string_view(a).substr(0, ca)) && loop(std::string_view(b).substr(0, cb));
}

// POST /admin/alerts/webhook: Alertmanager's payload (version 4) split by the `instance`
// label of each alert and sent to the backend it names, so the replica in trouble, and only
// it, runs the alert's actions. Alerts naming no backend are answered `ignored`; a backend
// that cannot be reached makes the answer 502, so Alertmanager sends the group again.
http::Response dispatch_alerts(const Core& core, const json& payload) {
    if (!payload.is_object() || !payload.contains("alerts") || !payload["alerts"].is_array()) {
        return api_error(400,
                         "not an Alertmanager webhook payload: expected version \"4\" and an "
                         "'alerts' list",
                         "invalid_request_error");
    }
    std::map<std::shared_ptr<Backend>, json> by_backend;  // the alerts each backend gets
    json results = json::array();
    const auto backends = core.all_backends();
    for (const json& a : payload["alerts"]) {
        const json labels = a.is_object() ? a.value("labels", json::object()) : json::object();
        const std::string name = labels.value("alertname", "");
        const std::string inst = labels.value("instance", "");
        std::shared_ptr<Backend> to;
        for (const auto& b : backends) {
            if (!inst.empty() && same_instance(host_port(b->url()), inst)) to = b;
        }
        if (!to) {
            results.push_back({{"alertname", name},
                               {"instance", inst},
                               {"result", "ignored"},
                               {"reason", inst.empty() ? "the alert has no instance label"
                                                       : "no backend of this router is " + inst}});
            continue;
        }
        by_backend[to].push_back(a);
    }
    bool delivered = true;
    for (auto& [b, alerts] : by_backend) {
        json part = payload;
        part["alerts"] = alerts;
        auto r = b->health_client().fetch({.method = "POST",
                                           .path = "/admin/alerts/webhook",
                                           .body = part.dump(),
                                           .content_type = "application/json",
                                           .headers = admin_headers(core.cfg.backend_admin_key)});
        const int status = r ? r->status : 0;
        delivered = delivered && status != 0 && status < 500;
        for (const json& a : alerts) {
            const json labels = a.value("labels", json::object());
            const json d = {{"alertname", labels.value("alertname", "")},
                            {"instance", labels.value("instance", "")},
                            {"status", a.value("status", "")},
                            {"backend", b->url()},
                            {"backend_status", status},
                            {"outcome", status / 100 == 2 ? "ok" : "failed"},
                            {"error", r ? r->body.substr(0, 300) : r.error().message}};
            core.audit("alert_dispatched", d);
            if (status / 100 != 2) log_warn("router_alert_dispatch_failed detail={}", d.dump());
            results.push_back(d);
        }
    }
    return json_reply(delivered ? 200 : 502, {{"alerts", results}});
}

http::Reply admin(const std::shared_ptr<Core>& core, const http::Request& req) {
    json body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
    if (body.is_discarded())
        return {api_error(400, "the body is not JSON", "invalid_request_error"), {}};
    if (req.path == "/admin/pools") return {json_reply(200, core->pools_json()), {}};
    if (req.path == "/admin/events" && req.method == "GET") return {events_reply(*core, req), {}};
    if (req.path == "/admin/alerts/webhook" && req.method == "POST") {
        // Calls the backends: on a thread of its own, not the I/O thread.
        return http::Reply::later([core, body](std::shared_ptr<http::Responder> r) {
            std::thread([core, body, r] { r->send(dispatch_alerts(*core, body)); }).detach();
        });
    }
    if (req.path == "/admin/weights") {
        if (req.method == "GET") return {json_reply(200, {{"weights", core->weights()}}), {}};
        if (!body.contains("weights") || !body["weights"].is_object()) {
            return {api_error(400, "expected {\"weights\": {\"POOL\": PERCENT, ...}}",
                              "invalid_request_error"),
                    {}};
        }
        std::map<std::string, double> w;
        for (const auto& [k, v] : body["weights"].items()) {
            if (!v.is_number()) {
                return {api_error(400, "weight of '" + k + "' is not a number",
                                  "invalid_request_error"),
                        {}};
            }
            w[k] = v.get<double>();
        }
        auto s = core->set_weights(w, body.value("reason", "admin"));
        if (!s) return {api_error(400, s.error().message, "invalid_request_error"), {}};
        return {json_reply(200, {{"weights", core->weights()}}), {}};
    }
    if (req.path == "/admin/dr") {
        if (req.method == "POST") {
            if (!body.contains("active") || !body["active"].is_boolean()) {
                return {
                    api_error(400, "expected {\"active\": true|false}", "invalid_request_error"),
                    {}};
            }
            core->set_dr(body["active"].get<bool>(), body.value("reason", "admin"));
        }
        return {json_reply(200, {{"active", core->dr_forced()}}), {}};
    }
    Router::AdminRoute route;
    {
        std::lock_guard lock(core->extras_mu);
        if (auto it = core->admin_routes.find(req.path); it != core->admin_routes.end()) {
            route = it->second;
        }
    }
    if (route) {
        auto [status, j] = route(req.method, body);
        return {json_reply(status, j), {}};
    }
    return {api_error(404, "no admin route " + req.path, "invalid_request_error"), {}};
}

http::Reply handle(const std::shared_ptr<Core>& core, const http::Request& req) {
    const std::string& p = req.path;
    if (req.method == "GET") {
        if (auto page = ui::serve(p, ui::Kind::kRouter)) return {std::move(*page), {}};
    }
    if (p == "/health") return {json_reply(200, json::object()), {}};
    if (p == "/ready") {  // with a hold queue, requests wait for a pool that wakes from zero
        if (core->any_ready()) return {json_reply(200, {{"status", "ready"}}), {}};
        if (core->cfg.hold_timeout_s > 0) return {json_reply(200, {{"status", "holding"}}), {}};
        return {api_error(503, "no backend is ready", "server_error"), {}};
    }
    if (p == "/metrics") {
        http::Response m;
        m.content_type = "text/plain; version=0.0.4; charset=utf-8";
        m.body = core->metrics_text();
        std::vector<std::function<std::string()>> extra;
        {
            std::lock_guard lock(core->extras_mu);
            extra = core->metrics_sources;
        }
        for (const auto& f : extra) m.body += f();
        return {m, {}};
    }
    if (p.starts_with("/admin/")) {
        const bool ok =
            (req.method == "GET" && core->cfg.admin_read_open) ||
            (core->cfg.admin_api_keys.empty() ? loopback(req)
                                              : key_matches(bearer(req), core->cfg.admin_api_keys));
        if (!ok) {
            return {api_error(401,
                              core->cfg.admin_api_keys.empty()
                                  ? "admin routes answer only on loopback unless admin keys are set"
                                  : "missing or wrong admin key",
                              "authentication_error"),
                    {}};
        }
        return admin(core, req);
    }
    if (!core->cfg.api_keys.empty() && !key_matches(bearer(req), core->cfg.api_keys)) {
        return {api_error(401, "missing or wrong API key: send 'Authorization: Bearer <key>'",
                          "authentication_error"),
                {}};
    }
    const bool chat = p == "/v1/chat/completions";
    if ((chat || p == "/v1/completions") && req.method == "POST") {
        auto in = generation_input(*core, req, chat);
        if (!in) return {api_error(400, in.error().message, "invalid_request_error"), {}};
        in->request_id = http::request_id(req);
        return proxy(core, std::move(*in));
    }
    // Everything else (models, tokenize, ...) goes to one backend as it is.
    CallInput in;
    in.method = req.method;
    in.path = req.target;
    in.raw_body = req.body;
    in.content_type = std::string(req.header("content-type"));
    in.key.draw = 0.5;
    in.request_id = http::request_id(req);
    return proxy(core, std::move(in));
}

}  // namespace

Router::~Router() { stop(); }

Result<std::unique_ptr<Router>> Router::start(const RouterConfig& cfg, RouterHooks hooks) {
    PAGODA_TRY(validate(cfg));
    std::unique_ptr<Router> r(new Router());
    r->core_ = std::make_shared<Core>(cfg, std::move(hooks));
    check_all(*r->core_);
    http::ServerOptions so;
    so.host = cfg.host;
    so.port = cfg.port;
    so.max_body_bytes = size_t(cfg.max_request_body);
    std::weak_ptr<Core> weak = r->core_;
    PAGODA_ASSIGN_OR_RETURN(
        r->core_->server, http::Server::start(so, [weak](const http::Request& req) {
            auto core = weak.lock();
            if (!core) return http::Reply{api_error(503, "stopping", "server_error"), {}};
            return handle(core, req);
        }));
    r->core_->health_thread = std::thread([core = r->core_] { health_loop(core); });
    return r;
}

int Router::port() const { return core_->server ? core_->server->port() : 0; }

void Router::stop() {
    if (!core_) return;
    core_->stopping = true;
    if (core_->health_thread.joinable()) core_->health_thread.join();
    if (core_->server) core_->server->stop();
    // Closing the connections cancels the calls in flight; wait for them to let go of the
    // core, so that the last reference (and the backends' clients) is dropped here and
    // never on a backend's own I/O thread, which cannot join itself.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (core_.use_count() > 1 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

Status Router::set_weights(const std::map<std::string, double>& w, const std::string& reason) {
    return core_->set_weights(w, reason);
}
std::map<std::string, double> Router::weights() const { return core_->weights(); }
void Router::set_dr(bool forced, const std::string& reason) { core_->set_dr(forced, reason); }
json Router::pools_json() const { return core_->pools_json(); }

void Router::set_pool_members(const std::string& pool, const std::vector<std::string>& urls) {
    core_->set_members(pool, urls, "fleet");
}

int64_t Router::held() const { return core_->held(); }

double Router::last_unserved_s() const { return core_->last_unserved_s.load(); }
std::vector<ArmSample> Router::arm_samples(const std::string& pool, double since_s) const {
    return core_->arm_samples(pool, since_s);
}
double Router::now_s() const { return core_->now_s(); }
void Router::add_admin_route(const std::string& path, AdminRoute route) {
    std::lock_guard lock(core_->extras_mu);
    core_->admin_routes[path] = std::move(route);
}
void Router::add_metrics_source(std::function<std::string()> source) {
    std::lock_guard lock(core_->extras_mu);
    core_->metrics_sources.push_back(std::move(source));
}
void Router::audit(const std::string& kind, const json& detail) const {
    log_info("router_{} detail={}", kind, detail.dump());
    core_->audit(kind, detail);
}
const RouterConfig& Router::config() const { return core_->cfg; }

namespace {

// One backend's warmup report (GET /admin/warmup), or why there is none.
Result<json> warmup_report(Backend& b, const std::string& key) {
    auto r = b.health_client().fetch({.method = "GET",
                                      .path = "/admin/warmup",
                                      .body = "",
                                      .content_type = "",
                                      .headers = admin_headers(key)});
    if (!r) return make_error(ErrorCode::kIo, "GET /admin/warmup: {}", r.error().message);
    if (r->status != 200) {
        return make_error(ErrorCode::kIo, "GET /admin/warmup answered {}", r->status);
    }
    auto j = json::parse(r->body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return make_error(ErrorCode::kIo, "GET /admin/warmup: not a JSON object");
    }
    return j;
}

// Asks each backend for a full warmup; returns those that accepted (the others, with why,
// go to `failures`).
std::vector<std::shared_ptr<Backend>> ask_full_warmup(
    const std::vector<std::shared_ptr<Backend>>& backends, const std::string& key, json& failures) {
    std::vector<std::shared_ptr<Backend>> accepted;
    for (const auto& b : backends) {
        auto r = b->health_client().fetch({.method = "POST",
                                           .path = "/admin/warmup",
                                           .body = R"({"level": "full"})",
                                           .content_type = "application/json",
                                           .headers = admin_headers(key)});
        if (r && r->status / 100 == 2) {
            accepted.push_back(b);
        } else {
            failures.push_back({{"backend", b->url()},
                                {"reason", r ? fmt::format("POST /admin/warmup answered {}: {}",
                                                           r->status, r->body.substr(0, 200))
                                             : "POST /admin/warmup: " + r.error().message}});
        }
    }
    return accepted;
}

}  // namespace

json Router::prewarm_pool(const std::string& pool, double timeout_s) {
    const auto t0 = std::chrono::steady_clock::now();
    auto since = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    const auto backends = core_->backends_of(pool);
    json failures = json::array();
    std::vector<std::shared_ptr<Backend>> waiting =
        ask_full_warmup(backends, core_->cfg.backend_admin_key, failures);
    const size_t accepted = waiting.size();
    int warmed = 0;
    while (!waiting.empty() && !core_->stopping.load()) {
        for (auto it = waiting.begin(); it != waiting.end();) {
            auto j = warmup_report(**it, core_->cfg.backend_admin_key);
            const std::string level = j ? j->value("level", "") : "";
            const std::string state =
                j ? j->value("full_warmup", json::object()).value("state", "") : "";
            if (level == "full" && state == "done") {
                ++warmed;
                it = waiting.erase(it);
            } else if (state == "failed") {
                const std::string detail =
                    j->value("full_warmup", json::object()).value("detail", "");
                failures.push_back({{"backend", (*it)->url()}, {"reason", "failed: " + detail}});
                it = waiting.erase(it);
            } else {
                ++it;
            }
        }
        if (waiting.empty()) break;
        if (since() > timeout_s) {
            for (const auto& b : waiting) {
                failures.push_back(
                    {{"backend", b->url()},
                     {"reason", fmt::format("not at level full after {:.0f} s", timeout_s)}});
            }
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const bool ok = !backends.empty() && warmed == int(backends.size());
    const json d = {{"pool", pool},      {"replicas", backends.size()},     {"accepted", accepted},
                    {"warmed", warmed},  {"outcome", ok ? "ok" : "failed"}, {"failures", failures},
                    {"seconds", since()}};
    core_->metrics.prewarm(pool, ok ? "ok" : "failed");
    if (!ok) log_warn("router_pool_prewarm_failed detail={}", d.dump());
    audit("pool_prewarmed", d);
    return d;
}

}  // namespace pagoda::router
