#pragma once
// OpenAiServer: the OpenAI-compatible API over the engine. Routes requests (this file),
// checks keys, answers health and readiness, and hands work to one file per concept:
// completion_call (generation requests and SSE), tokenize_routes (/tokenize, /detokenize),
// admin_routes (/admin/*), metrics_exporter (/metrics). Transport-agnostic: handle() maps
// an http::Request to an http::Reply on the HTTP server's I/O thread. Thread-safe.

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "http/server.h"
#include "server/admin_api.h"
#include "server/chat_template.h"
#include "server/completion_call.h"
#include "server/metrics_exporter.h"

namespace pagoda::server {

struct ServerConfig {
    std::string served_model_name;      // what /v1/models lists and requests may name
    std::vector<std::string> api_keys;  // empty: no authentication (inference routes)
    // Keys for /admin/*; empty: admin routes answer only on loopback. Inference keys never
    // open them.
    std::vector<std::string> admin_api_keys;
    // GET /admin/* answers without the admin key (the console's read-only view; changes
    // still need it). --admin-read-open.
    bool admin_read_open = false;
    AdminRoutes admin;                       // the control plane's route families (admin_api.h)
    std::chrono::seconds stall_timeout{30};  // /health turns 503 when the loop is silent this long
    std::function<int64_t()> open_connections;  // from the HTTP server, for /metrics
    std::function<int64_t()> stream_writes;     // likewise
    // Also publish the vllm:* names gateways and autoscalers read. Off for scrapers or
    // linters that reject ':' in names (promtool check metrics); pagoda_* stays complete.
    bool vllm_metrics = true;
    LengthClasses length_classes;    // the business layer's short | long split
    int64_t memory_limit_bytes = 0;  // --memory-limit or the cgroup's (0: physical memory)
    double memory_bandwidth = 0;     // measured peak, bytes/s, for the bandwidth metrics
    // How chats are rendered (--chat-template, --trust-request-chat-template); null: the
    // model's template with the defaults.
    std::shared_ptr<const ChatTemplate> chat;
    // How tool calls are read from outputs (--tool-call-parser); unset: from the template.
    std::optional<ToolParser> tool_parser;
    // Tokens a stream gathers before its next write (vLLM's --stream-interval): 1 writes each
    // token as it comes; N cuts the front end's writes and wake-ups per token N-fold (the
    // first token and the last are never held).
    int stream_interval = 1;
};

class OpenAiServer {
  public:
    OpenAiServer(engine::Engine& engine, ServerConfig cfg);

    // Origin::kWarmup: an in-process request sent before ready (bypasses the readiness
    // check and the metrics).
    http::Reply handle(const http::Request& req, Origin origin = Origin::kClient);
    // The access log: one line per API request naming this replica (host:port).
    void set_access_log(bool on, std::string replica) {
        metrics_.requests().set_access_log(on, std::move(replica));
    }

    void set_ready(bool ready) { ready_.store(ready); }
    bool ready() const { return ready_.load() && !draining_.load(); }
    // Stop admitting: new generation requests get 503; in-flight ones continue.
    void start_drain() { draining_.store(true); }
    bool draining() const { return draining_.load(); }
    // An alert moves traffic away: /ready answers 503 "shedding" (requests still served).
    void set_shedding(bool shedding) { shedding_.store(shedding); }
    bool shedding() const { return shedding_.load(); }
    // warming | serving | shedding | draining
    const char* replica_state() const;
    int64_t in_flight() const { return in_flight_.load(); }
    std::string metrics_text() const;
    nlohmann::json slowest_requests(int n) const { return metrics_.requests().slowest(n); }

  private:
    http::Reply route(const http::Request& req, Origin origin, const std::string& request_id);
    http::Reply generate(const http::Request& req, Endpoint endpoint, Origin origin,
                         const std::string& request_id);
    http::Reply health() const;
    http::Reply readiness() const;
    http::Reply models() const;
    http::Reply admin(const http::Request& req);  // admin_routes.cpp
    http::Reply admin_config(const http::Request& req);
    std::optional<http::Reply> admin_control(const http::Request& req);
    std::optional<http::Reply> admin_alerts(const http::Request& req);
    std::optional<http::Reply> admin_warm(const http::Request& req);
    http::Reply admin_faults(const http::Request& req);
    bool authorized(const http::Request& req) const;
    bool admin_authorized(const http::Request& req) const;
    bool fault_draw(double rate);  // an injected error for this request? (sim faults)

    engine::Engine& engine_;
    ServerConfig cfg_;
    ConstraintCache constraints_;
    std::shared_ptr<PumpQueue> pumps_ = std::make_shared<PumpQueue>();
    ToolParser tool_parser_ = ToolParser::kLlama3Json;
    std::atomic<bool> ready_{false}, draining_{false}, shedding_{false};
    std::atomic<int64_t> in_flight_{0};
    std::atomic<uint64_t> fault_draws_{0};
    int64_t created_ = 0;
    ServerMetrics metrics_;
};

}  // namespace pagoda::server
