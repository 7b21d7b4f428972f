// OpenAiServer: the implementation (the contract is in server/openai_server.h).
#include "server/openai_server.h"

#include <fmt/core.h>

#include "base/hash.h"
#include "base/log.h"
#include "server/api_error.h"
#include "server/tokenize_routes.h"
#include "ui/ui.h"

namespace pagoda::server {

namespace {

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// Compares without an early exit, so the time taken does not reveal how much of a key
// matched; only the length can show.
bool equal_constant_time(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0;
}

}  // namespace

OpenAiServer::OpenAiServer(engine::Engine& engine, ServerConfig cfg)
    : engine_(engine), cfg_(std::move(cfg)), created_(unix_now()), metrics_(cfg_.length_classes) {
    if (!cfg_.chat) cfg_.chat = ChatTemplate::create(engine_.model().tokenizer().vocab(), {});
    tool_parser_ = cfg_.tool_parser.value_or(detect_tool_parser(cfg_.chat->source()));
}

const char* OpenAiServer::replica_state() const {
    if (draining_) return "draining";
    if (!ready_) return "warming";
    return shedding_ ? "shedding" : "serving";
}

bool bearer_matches(const http::Request& req, const std::vector<std::string>& keys) {
    const std::string_view h = req.header("authorization");
    if (h.substr(0, 7) != "Bearer ") return false;
    const std::string_view key = h.substr(7);
    bool ok = false;
    for (const auto& k : keys) ok |= equal_constant_time(key, k);
    return ok;
}

bool is_loopback(const std::string& remote) {
    return remote.rfind("127.", 0) == 0 || remote.rfind("::1", 0) == 0 ||
           remote.rfind("::ffff:127.", 0) == 0;
}

bool OpenAiServer::authorized(const http::Request& req) const {
    return cfg_.api_keys.empty() || bearer_matches(req, cfg_.api_keys);
}

bool OpenAiServer::admin_authorized(const http::Request& req) const {
    if (cfg_.admin_api_keys.empty()) return is_loopback(req.remote);
    return bearer_matches(req, cfg_.admin_api_keys);
}

http::Reply OpenAiServer::handle(const http::Request& req, Origin origin) {
    const bool api =
        req.path.starts_with("/v1/") || req.path == "/tokenize" || req.path == "/detokenize";
    const std::string rid = api ? http::request_id(req) : std::string();
    http::Reply r = route(req, origin, rid);
    if (!r.deferred) metrics_.count_response(r.now.status);
    if (api && !r.deferred) {  // answered at once (errors, models, tokenize): logged here
        r.now.headers.emplace_back("X-Request-Id", rid);
        if (origin != Origin::kWarmup && metrics_.requests().access_log()) {
            log_info("access id={} route={} status={} replica={}", rid, req.path, r.now.status,
                     metrics_.requests().replica());
        }
    }
    return r;
}

http::Reply OpenAiServer::route(const http::Request& req, Origin origin,
                                const std::string& request_id) {
    const std::string& p = req.path;
    const bool get = req.method == "GET", post = req.method == "POST";
    if (get) {
        if (auto page = ui::serve(p, ui::Kind::kReplica)) return reply(std::move(*page));
    }
    if (p == "/health") return health();
    if (p == "/ready") return readiness();
    if (p == "/metrics" && get) {
        http::Response m;
        m.content_type = "text/plain; version=0.0.4; charset=utf-8";
        m.body = metrics_text();
        return reply(std::move(m));
    }
    if (p.rfind("/admin/", 0) == 0) {
        if (admin_authorized(req) || (get && cfg_.admin_read_open)) return admin(req);
        return reply(
            api_error(401,
                      cfg_.admin_api_keys.empty()
                          ? "admin routes answer only on loopback unless --admin-api-key is set"
                          : "missing or wrong admin key: send 'Authorization: Bearer <admin key>'",
                      "authentication_error"));
    }
    const bool api = p.rfind("/v1/", 0) == 0 || p == "/tokenize" || p == "/detokenize";
    if (api && origin != Origin::kWarmup && !authorized(req)) {  // warmup runs in process
        return reply(api_error(401, "missing or wrong API key: send 'Authorization: Bearer <key>'",
                               "authentication_error"));
    }
    if (p == "/v1/models" && get) return models();
    if (p == "/v1/completions" && post) {
        return generate(req, Endpoint::kCompletions, origin, request_id);
    }
    if (p == "/v1/chat/completions" && post) {
        return generate(req, Endpoint::kChatCompletions, origin, request_id);
    }
    if (p == "/tokenize" && post) return tokenize(req, engine_, *cfg_.chat);
    if (p == "/detokenize" && post) return detokenize(req, engine_);
    return reply(
        api_error(404, fmt::format("no route for {} {}", req.method, p), "not_found_error"));
}

http::Reply OpenAiServer::generate(const http::Request& req, Endpoint endpoint, Origin origin,
                                   const std::string& request_id) {
    if (draining_) {
        return reply(
            api_error(503, "the server is draining and accepts no new requests", "server_error"));
    }
    if (!ready_ && origin != Origin::kWarmup) {
        return reply(api_error(503, "the server is warming up; retry shortly", "server_error"));
    }
    if (const double rate = engine_.model().sim_faults().error_rate;
        rate > 0 && origin != Origin::kWarmup && fault_draw(rate)) {
        metrics_.requests().count_error(ErrorKind::kInternal);
        return reply(
            api_error(500, "injected fault (POST /admin/faults error_rate)", "server_error"));
    }
    return start_completion(
        req, endpoint, origin,
        {engine_, metrics_, in_flight_, cfg_.served_model_name, cfg_.chat.get(), &constraints_,
         tool_parser_, request_id, req.path, pumps_, cfg_.stream_interval});
}

bool OpenAiServer::fault_draw(double rate) {
    const uint64_t x = splitmix64(fault_draws_.fetch_add(1) + 0x9e3779b97f4a7c15ull);
    return double(x >> 11) * 0x1.0p-53 < rate;
}

http::Reply OpenAiServer::health() const {
    const auto age = engine::Clock::now() - engine_.last_heartbeat();
    if (age > cfg_.stall_timeout) {
        return reply(api_error(503, "the engine loop is stalled", "server_error"));
    }
    return reply(json_response(200, json::object()));
}

http::Reply OpenAiServer::readiness() const {
    if (draining_) {
        return reply(api_error(503, "draining: not accepting new requests", "server_error"));
    }
    if (!ready_) return reply(api_error(503, "warming up", "server_error"));
    if (shedding_) {
        http::Response r = api_error(
            503,
            "shedding: an alert moves traffic to other replicas (GET /admin/alerts says which)",
            "server_error");
        return reply(r);
    }
    return reply(json_response(200, json{{"status", "ready"}}));
}

http::Reply OpenAiServer::models() const {
    json m = {{"id", cfg_.served_model_name},
              {"object", "model"},
              {"created", created_},
              {"owned_by", "pagoda"},
              {"root", cfg_.served_model_name},
              {"max_model_len", engine_.config().sched.max_model_len}};
    return reply(json_response(200, json{{"object", "list"}, {"data", json::array({m})}}));
}

std::string OpenAiServer::metrics_text() const {
    std::string text = metrics_.text({.engine = engine_,
                                      .model_name = cfg_.served_model_name,
                                      .ready = ready(),
                                      .vllm_names = cfg_.vllm_metrics,
                                      .open_connections = cfg_.open_connections,
                                      .stream_writes = cfg_.stream_writes,
                                      .memory_limit_bytes = cfg_.memory_limit_bytes,
                                      .memory_bandwidth = cfg_.memory_bandwidth,
                                      .replica_state = replica_state()});
    if (cfg_.admin.metrics_text) text += cfg_.admin.metrics_text(cfg_.served_model_name);
    return text;
}

}  // namespace pagoda::server
