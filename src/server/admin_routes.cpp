// /admin/*: drain, the runtime knobs, and the control plane's route families (admin_api.h:
// config, control, alerts, warm), each answering for itself. Separate from inference
// routes; OpenAiServer::route checks the admin key (or loopback) before any of these run.
#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>

#include "base/log.h"
#include "server/api_error.h"
#include "server/openai_server.h"
#include "settings/settings.h"

namespace pagoda::server {

namespace {

json knobs_json(const engine::RuntimeKnobs& k) {
    json j = json::object();
    for (const settings::Spec& s : settings::all()) {
        if (settings::is_knob(s)) j[std::string(s.name)] = *k.get(s.name);
    }
    return j;
}

// Applies a partial JSON object onto `k` through the settings table; a wrong key, type or
// value is a 400 with the table's message and changes nothing.
std::optional<http::Reply> apply_knobs_json(const json& j, engine::RuntimeKnobs& k) {
    if (!j.is_object()) return bad_request("the knobs must be a JSON object");
    engine::RuntimeKnobs next = k;
    for (const auto& [key, v] : j.items()) {
        auto spec = settings::lookup(key, settings::is_knob);
        if (!spec.ok()) return bad_request(spec.error().message, key);
        auto x = settings::parse_json(**spec, v);
        if (!x.ok()) return bad_request(x.error().message, key);
        next.set(key, x->number);
    }
    k = next;
    return std::nullopt;
}

std::optional<int64_t> if_match(const http::Request& req) {
    std::string v(req.header("if-match"));
    std::erase(v, '"');
    if (v.empty()) return std::nullopt;
    char* end = nullptr;
    const long long id = std::strtoll(v.c_str(), &end, 10);
    if (end == v.c_str() || *end != '\0') return std::nullopt;
    return int64_t(id);
}

http::Reply from_admin(const AdminReply& r) { return reply(json_response(r.status, r.body)); }

// The value of `key` in the target's query string ("" when absent).
std::string query_string(const std::string& target, const std::string& key) {
    const size_t q = target.find('?');
    if (q == std::string::npos) return "";
    size_t pos = q + 1;
    while (pos < target.size()) {
        const size_t amp = std::min(target.find('&', pos), target.size());
        const std::string item = target.substr(pos, amp - pos);
        if (item.rfind(key + "=", 0) == 0) return item.substr(key.size() + 1);
        pos = amp + 1;
    }
    return "";
}

// An integer query value; `fallback` when absent, -1 when not an integer.
int query_int(const std::string& target, const std::string& key, int fallback) {
    const std::string v = query_string(target, key);
    if (v.empty()) return fallback;
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (*end != '\0' || n < INT32_MIN || n > INT32_MAX) return -1;
    return int(n);
}

// A family this server does not have.
http::Reply not_enabled(const char* what) {
    return reply(
        api_error(404, fmt::format("{} is not enabled on this server", what), "not_found_error"));
}

}  // namespace

// /admin/config: GET (current), PUT (partial value; If-Match: VERSION for optimistic
// concurrency), GET /admin/config/history?limit=N, POST /admin/config/rollback {"to": ID}.
http::Reply OpenAiServer::admin_config(const http::Request& req) {
    ConfigRoutes& c = *cfg_.admin.config;
    const std::string& p = req.path;
    const bool get = req.method == "GET";
    if (p == "/admin/config" && get) return from_admin(c.get());
    if (p == "/admin/config/history" && get) {
        const int limit = query_int(req.target, "limit", 50);
        if (limit < 1 || limit > 10000) {
            return bad_request("'limit' must be an integer in [1, 10000]", "limit");
        }
        return from_admin(c.history(limit));
    }
    http::Response err;
    auto j = parse_body(req, err);
    if (!j) return reply(err);
    std::string reason;
    if (auto it = j->find("reason"); it != j->end() && it->is_string()) reason = *it;
    if (p == "/admin/config" && req.method == "PUT") {
        json patch = *j;
        patch.erase("reason");
        return from_admin(c.put(patch, if_match(req), reason));
    }
    if (p == "/admin/config/rollback" && req.method == "POST") {
        std::optional<int64_t> to;
        if (auto it = j->find("to"); it != j->end() && !it->is_null()) {
            if (!it->is_number_integer()) {
                return bad_request("'to' must be a version id (an integer)", "to");
            }
            to = it->get<int64_t>();
        }
        return from_admin(c.rollback(to, reason));
    }
    return reply(
        api_error(404, fmt::format("no route for {} {}", req.method, p), "not_found_error"));
}

// The automatic actions and their record: block size, OOM guard, automation mode, the
// human pause, the audit log.
std::optional<http::Reply> OpenAiServer::admin_control(const http::Request& req) {
    const std::string& p = req.path;
    const bool get = req.method == "GET", post = req.method == "POST";
    static const char* const kRoutes[] = {"/admin/block-size", "/admin/oom-guard",
                                          "/admin/automation", "/admin/control",
                                          "/admin/events",     "/admin/audit"};
    if (std::none_of(std::begin(kRoutes), std::end(kRoutes),
                     [&](const char* r) { return p.rfind(r, 0) == 0; })) {
        return std::nullopt;
    }
    if (!cfg_.admin.control) return not_enabled("the control plane");
    ControlRoutes& c = *cfg_.admin.control;
    if (p == "/admin/block-size" && get) return from_admin(c.block_size(false));
    if (p == "/admin/block-size/decide" && req.method == "POST")
        return from_admin(c.block_size(true));
    if (p == "/admin/oom-guard" && get) return from_admin(c.oom_guard());
    if (p == "/admin/automation" && get) return from_admin(c.automation(std::nullopt));
    if (p == "/admin/automation" && req.method == "PUT") {
        http::Response err;
        auto j = parse_body(req, err);
        if (!j) return reply(err);
        return from_admin(c.automation(*j));
    }
    if ((p == "/admin/events" || p == "/admin/audit") && get) {
        const int limit = query_int(req.target, "limit", p == "/admin/events" ? 50 : 100);
        if (limit < 1 || limit > 10000) {
            return bad_request("'limit' must be an integer in [1, 10000]", "limit");
        }
        return from_admin(c.events(query_string(req.target, "kind"), limit));
    }
    if (p == "/admin/control" && get) return from_admin(c.control("status"));
    if ((p == "/admin/control/pause" || p == "/admin/control/resume") && post) {
        return from_admin(c.control(p.substr(std::string("/admin/control/").size())));
    }
    return std::nullopt;
}

// Alerting: rule states, rules and their reload, Alertmanager's webhook; and the slowest
// recent requests with their stage breakdown (always there).
std::optional<http::Reply> OpenAiServer::admin_alerts(const http::Request& req) {
    const std::string& p = req.path;
    const bool get = req.method == "GET", post = req.method == "POST";
    if (p == "/admin/requests/slowest" && get) {
        const int n = query_int(req.target, "n", 20);
        if (n < 1 || n > 1000) return bad_request("'n' must be an integer in [1, 1000]", "n");
        return reply(json_response(200, metrics_.requests().slowest(n)));
    }
    if (p.rfind("/admin/alerts", 0) != 0 && p.rfind("/admin/rules", 0) != 0) return std::nullopt;
    if (!cfg_.admin.alerts) return not_enabled("alerting");
    AlertRoutes& c = *cfg_.admin.alerts;
    if (p == "/admin/alerts" && get) return from_admin(c.alerts());
    if (p == "/admin/rules" && get) return from_admin(c.rules(false));
    if (p == "/admin/rules/reload" && post) return from_admin(c.rules(true));
    if (p == "/admin/alerts/webhook" && post) {
        http::Response err;
        auto j = parse_body(req, err);
        if (!j) return reply(err);
        return from_admin(c.alert_webhook(*j));
    }
    return std::nullopt;
}

// Warm levels and the rate forecast.
std::optional<http::Reply> OpenAiServer::admin_warm(const http::Request& req) {
    const std::string& p = req.path;
    if (p != "/admin/warmup" && p != "/admin/forecast") return std::nullopt;
    if (!cfg_.admin.warm) return not_enabled("the control plane");
    WarmRoutes& c = *cfg_.admin.warm;
    if (p == "/admin/warmup" && req.method == "GET") return from_admin(c.warmup(std::nullopt));
    if (p == "/admin/forecast" && req.method == "GET") return from_admin(c.forecast());
    if (p == "/admin/warmup" && req.method == "POST") {
        http::Response err;
        auto j = parse_body(req, err);
        if (!j) return reply(err);
        return from_admin(c.warmup(*j));
    }
    return std::nullopt;
}

json faults_json(const model::SimFaults& f) {
    return {{"memory_pressure", f.memory_pressure},
            {"slow_factor", f.slow_factor},
            {"error_rate", f.error_rate},
            {"crash_after_tokens", f.crash_after_tokens}};
}

// GET|POST /admin/faults (sim backend, admin key only): faults for rehearsals and tests.
// POST merges the given fields ({"clear": true} first resets them all); audited in the log.
http::Reply OpenAiServer::admin_faults(const http::Request& req) {
    if (cfg_.admin_api_keys.empty()) {
        return reply(api_error(403,
                               "fault injection needs an admin key: start the server with "
                               "--admin-api-key and send it as a bearer token",
                               "permission_error"));
    }
    const model::Model& m = engine_.model();
    if (!m.simulated()) {
        return reply(api_error(400, "fault injection needs the simulated backend (--backend sim)",
                               "invalid_request_error"));
    }
    if (req.method == "GET") return reply(json_response(200, faults_json(m.sim_faults())));
    http::Response err;
    auto j = parse_body(req, err);
    if (!j) return reply(err);
    model::SimFaults f = j->value("clear", false) ? model::SimFaults{} : m.sim_faults();
    for (const auto& [key, v] : j->items()) {
        if (key == "clear") continue;
        if (!v.is_number()) {
            return bad_request(fmt::format("'{}' must be a number (known: memory_pressure, "
                                           "slow_factor, error_rate, crash_after_tokens, clear)",
                                           key),
                               key);
        }
        if (key == "memory_pressure")
            f.memory_pressure = v.get<double>();
        else if (key == "slow_factor")
            f.slow_factor = v.get<double>();
        else if (key == "error_rate")
            f.error_rate = v.get<double>();
        else if (key == "crash_after_tokens")
            f.crash_after_tokens = v.get<int64_t>();
        else
            return bad_request(fmt::format("unknown fault '{}'", key), key);
    }
    if (Status st = m.set_sim_faults(f); !st.ok()) return bad_request(st.error().message);
    log_warn("sim_faults_set remote={} faults={}", req.remote, faults_json(f).dump());
    return reply(json_response(200, faults_json(f)));
}

http::Reply OpenAiServer::admin(const http::Request& req) {
    const std::string& p = req.path;
    if (p == "/admin/faults" && (req.method == "GET" || req.method == "POST")) {
        return admin_faults(req);
    }
    if (cfg_.admin.config && p.rfind("/admin/config", 0) == 0) return admin_config(req);
    if (auto r = admin_alerts(req)) return *r;
    if (auto r = admin_control(req)) return *r;
    if (auto r = admin_warm(req)) return *r;
    if (p == "/admin/drain" && req.method == "POST") {
        start_drain();
        log_info("drain_requested via=http remote={} in_flight={}", req.remote, in_flight());
        return reply(json_response(200, json{{"status", "draining"}, {"in_flight", in_flight()}}));
    }
    if (p == "/admin/knobs" && req.method == "GET") {
        return reply(json_response(200, knobs_json(engine_.knobs())));
    }
    if (p == "/admin/knobs" && req.method == "PUT") {
        http::Response err;
        auto j = parse_body(req, err);
        if (!j) return reply(err);
        if (cfg_.admin.config) {  // an alias of PUT /admin/config: versioned
            const AdminReply r = cfg_.admin.config->put(*j, std::nullopt, "PUT /admin/knobs");
            if (r.status != 200) return from_admin(r);
            return reply(json_response(200, knobs_json(engine_.knobs())));
        }
        engine::RuntimeKnobs k = engine_.knobs();
        if (auto bad = apply_knobs_json(*j, k)) return *bad;
        if (Status st = engine_.set_knobs(k); !st.ok()) return bad_request(st.error().message);
        return reply(json_response(200, knobs_json(k)));
    }
    return reply(
        api_error(404, fmt::format("no route for {} {}", req.method, p), "not_found_error"));
}

}  // namespace pagoda::server
