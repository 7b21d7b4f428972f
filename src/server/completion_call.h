#pragma once
// One /v1/completions or /v1/chat/completions request while it runs: submits its prompts to
// the engine, turns engine events into SSE chunks or one JSON body, records its metrics and
// cancels its engine requests when the client goes away. Created on the I/O thread; every
// later call runs there too (events arrive through RequestStream notifiers posted to it).

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "http/server.h"
#include "server/metrics_exporter.h"
#include "server/structured.h"

namespace pagoda::server {

class ChatTemplate;

enum class Endpoint { kCompletions, kChatCompletions };
// kWarmup: an in-process request sent before ready (not counted in metrics).
enum class Origin { kClient, kWarmup };

// What a call needs of the server; outlives every call.
// The engine's stream notifications of one step reach the I/O thread as one post: each
// notifier queues its call's pump, and only the first of a batch posts the drain (one
// wake-up per engine step instead of one per streaming request). One per server.
class PumpQueue : public std::enable_shared_from_this<PumpQueue> {
  public:
    using Pump = std::shared_ptr<const std::function<void()>>;
    void add(Pump pump, http::Responder& resp);

  private:
    void drain();
    std::mutex mu_;
    std::vector<Pump> pending_, draining_;  // draining_: the I/O thread's, capacity kept
};

struct CallContext {
    engine::Engine& engine;
    ServerMetrics& metrics;
    std::atomic<int64_t>& in_flight;
    std::string served_model_name;
    const ChatTemplate* chat = nullptr;
    ConstraintCache* constraints = nullptr;  // compiled grammars, shared by the calls
    ToolParser tool_parser = ToolParser::kLlama3Json;
    std::string request_id;            // X-Request-Id: the client's or the router's, else generated
    std::string route;                 // the request's path, for the access log
    std::shared_ptr<PumpQueue> pumps;  // null: a post per notification
    int stream_interval = 1;           // a stream's tokens per write (--stream-interval)
};

// Validates the body, submits every prompt and returns the deferred reply (or the error).
http::Reply start_completion(const http::Request& req, Endpoint endpoint, Origin origin,
                             const CallContext& ctx);

}  // namespace pagoda::server
