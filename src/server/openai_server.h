#pragma once
// The OpenAI-compatible API over the engine: request validation and mapping
// (/v1/completions, /v1/chat/completions, /v1/models, /tokenize, /detokenize), SSE
// streaming, health and readiness, drain, and /metrics (native pagoda_* names and the
// vLLM names gateways read). Transport-agnostic: handle() maps an http::Request to an
// http::Reply; the HTTP server runs it on its I/O thread. Thread-safe.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "http/server.h"
#include "metrics/metrics.h"

namespace pagoda::server {

struct ServerConfig {
    std::string served_model_name;           // what /v1/models lists and requests may name
    std::vector<std::string> api_keys;       // empty: no authentication
    std::chrono::seconds stall_timeout{30};  // /health turns 503 when the loop is silent this long
    std::function<int64_t()> open_connections;  // from the HTTP server, for /metrics
    // Also publish the vllm:* names gateways and autoscalers read. Off for scrapers or
    // linters that reject ':' in names (promtool check metrics); pagoda_* stays complete.
    bool vllm_metrics = true;
};

class OpenAiServer {
  public:
    OpenAiServer(engine::Engine& engine, ServerConfig cfg);
    ~OpenAiServer();

    // `warmup`: an in-process request sent before ready (bypasses the readiness check).
    http::Reply handle(const http::Request& req, bool warmup = false);

    void set_ready(bool ready) { ready_.store(ready); }
    bool ready() const { return ready_.load() && !draining_.load(); }
    // Stop admitting: new generation requests get 503; in-flight ones continue.
    void start_drain() { draining_.store(true); }
    bool draining() const { return draining_.load(); }
    int64_t in_flight() const { return in_flight_.load(); }
    std::string metrics_text() const;

  private:
    struct Call;  // one HTTP generation request in flight
    http::Reply completions(const http::Request& req, bool chat, bool warmup);
    http::Reply tokenize(const http::Request& req);
    http::Reply detokenize(const http::Request& req);
    http::Reply models() const;
    http::Reply put_knobs(const http::Request& req);
    bool authorized(const http::Request& req) const;
    void record_finished(const engine::Event& last, const std::vector<double>& itl, bool error);

    engine::Engine& engine_;
    ServerConfig cfg_;
    std::atomic<bool> ready_{false}, draining_{false};
    std::atomic<int64_t> in_flight_{0};
    int64_t created_ = 0;

    // Request-level metrics (observed when a request ends).
    metrics::Histogram ttft_, itl_, e2e_, queue_, prefill_, decode_, prompt_tokens_, gen_tokens_;
    metrics::Histogram output_;  // I/O-thread time turning engine events into JSON/SSE, per pump
    std::atomic<int64_t> http_by_status_[6] = {};  // 2xx..5xx by first digit, index 0 unused
    std::atomic<int64_t> finished_[6] = {};        // by engine FinishReason
    std::atomic<int64_t> prompt_total_{0}, gen_total_{0};
};

}  // namespace pagoda::server
