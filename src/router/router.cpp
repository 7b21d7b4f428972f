// The router's HTTP front: routes, keys, admin API, and the Router handle (router.h).
#include "router/router.h"

#include <fmt/format.h>

#include <chrono>
#include <future>
#include <thread>

#include "base/log.h"
#include "router/router_core.h"

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

http::Reply admin(const std::shared_ptr<Core>& core, const http::Request& req) {
    json body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
    if (body.is_discarded())
        return {api_error(400, "the body is not JSON", "invalid_request_error"), {}};
    if (req.path == "/admin/pools") return {json_reply(200, core->pools_json()), {}};
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
    if (p == "/health") return {json_reply(200, json::object()), {}};
    if (p == "/ready") {
        return {core->any_ready() ? json_reply(200, {{"status", "ready"}})
                                  : api_error(503, "no backend is ready", "server_error"),
                {}};
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
        const bool ok = core->cfg.admin_api_keys.empty()
                            ? loopback(req)
                            : key_matches(bearer(req), core->cfg.admin_api_keys);
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
        return proxy(core, std::move(*in));
    }
    // Everything else (models, tokenize, ...) goes to one backend as it is.
    CallInput in;
    in.method = req.method;
    in.path = req.target;
    in.raw_body = req.body;
    in.content_type = std::string(req.header("content-type"));
    in.key.draw = 0.5;
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
    so.max_body_bytes = 64u << 20;
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

int Router::post_to_pool(const std::string& pool, const std::string& path,
                         const std::string& body) {
    int ok = 0;
    for (const auto& b : core_->backends_of(pool)) {
        auto r = b->health_client().fetch({.method = "POST",
                                           .path = path,
                                           .body = body,
                                           .content_type = "application/json",
                                           .headers = {}});
        if (r && r->status / 100 == 2) ++ok;
    }
    return ok;
}

}  // namespace pagoda::router
