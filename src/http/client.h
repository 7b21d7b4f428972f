#pragma once
// An asynchronous HTTP/1.1 client for one base URL (Boost.Beast/Asio coroutines, one I/O
// thread, a pool of keep-alive connections). Built for load generation: start() returns at
// once, the request is written on the I/O thread, and the response body is handed over as
// it arrives (for SSE streams) so every chunk can be timestamped.
//
// This header does not include Beast; only client.cpp does (docs/architecture.md, "Folders and
// levels").

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace pagoda::http {

struct Url {
    std::string host;
    std::string port;       // "80" when not given
    std::string base_path;  // without a trailing '/', may be empty
};

// Parses "http://host[:port][/path]". https is refused with a clear message.
Result<Url> parse_url(std::string_view url);

struct ClientRequest {
    std::string method = "POST";
    std::string path;  // appended to the URL's base path, starts with '/'
    std::string body;
    std::string content_type = "application/json";
    std::vector<std::pair<std::string, std::string>> headers;
};

struct ClientError {
    enum class Kind { kConnect, kTimeout, kIo, kProtocol, kCancelled };
    Kind kind = Kind::kIo;
    std::string message;
};
const char* client_error_kind_name(ClientError::Kind kind);

// Callbacks run on the client's I/O thread and must not block.
struct ClientCallbacks {
    std::function<void()> on_sent;  // the request has been written (once)
    // The request failed on a pooled keep-alive connection before any byte of the answer
    // came (the server had closed it while idle) and is being sent again on a fresh one.
    std::function<void()> on_retry;
    std::function<void(int status)> on_status;        // the response header arrived
    std::function<void(std::string_view)> on_body;    // body bytes, as they arrive
    std::function<void(const ClientError*)> on_done;  // exactly once; null = complete
};

struct ClientOptions {
    std::string user_agent = "pagoda-bench";
    double connect_timeout_s = 10;
    double read_timeout_s = 600;  // longest silence while waiting for bytes
    std::vector<std::pair<std::string, std::string>> headers;  // sent with every request
};

struct ClientResponse {
    int status = 0;
    std::string body;
};

// A request in flight. cancel() aborts it: the connection is closed and on_done reports
// kCancelled (unless the request had already finished). Thread-safe, idempotent.
class PendingCall {
  public:
    virtual ~PendingCall() = default;
    virtual void cancel() = 0;
};

class Client {
  public:
    ~Client();  // aborts what is in flight and joins the I/O thread
    static Result<std::unique_ptr<Client>> create(std::string_view base_url,
                                                  ClientOptions opts = {});
    const Url& url() const;
    // Thread-safe; returns at once.
    std::shared_ptr<PendingCall> start(ClientRequest req, ClientCallbacks cb);
    // Blocking: the whole response. Must not be called from a callback.
    Result<ClientResponse> fetch(ClientRequest req);
    int64_t in_flight() const;
    int64_t connections_opened() const;
    int64_t retries() const;  // stale pooled connections retried on a fresh one (on_retry)

    struct Impl;  // opaque (client.cpp)

  private:
    Client() = default;
    std::shared_ptr<Impl> impl_;
};

}  // namespace pagoda::http
