#pragma once
// A small HTTP/1.1 server (keep-alive, chunked streaming for SSE) on Boost.Beast/Asio
// coroutines. One I/O thread runs every connection; handlers run on it and must not
// block: a handler answers at once, or defers and answers later from any thread through
// a Responder (a whole response, or a stream of chunks). A client that goes away while a
// deferred answer is pending is noticed at once (a read races the answer) and reported
// through Responder::on_disconnect.
//
// This header does not include Beast; only server.cpp does (docs/architecture.md, "Folders and
// levels").

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace pagoda::http {

struct Request {
    std::string method;  // "GET", "POST", ...
    std::string target;  // as sent: path and query
    std::string path;    // target without the query
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;  // names lower-case
    std::string remote;                                        // peer address

    std::string_view header(std::string_view lower_name) const;
};

struct Response {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
};

// The far end of a deferred answer. Thread-safe; every call after the connection closed
// is a no-op. Exactly one of send() or start_stream() ... finish() should be used.
class Responder {
  public:
    virtual ~Responder() = default;
    virtual void send(Response r) = 0;
    // Starts a chunked response (for SSE: content_type "text/event-stream").
    virtual void start_stream(int status, std::string content_type,
                              std::vector<std::pair<std::string, std::string>> headers = {}) = 0;
    // A chunk of the stream (copied where it cannot go out at once).
    virtual void write(std::string_view chunk) = 0;
    virtual void finish() = 0;
    // The stream's last chunk and its end: write(chunk) then finish(), in one socket write.
    virtual void write_last(std::string_view chunk) = 0;
    // Runs `fn` on the I/O thread (to format output there rather than on the caller's thread).
    virtual void post(std::function<void()> fn) = 0;
    // Called once, on the I/O thread, if the client disconnects before the answer is complete.
    virtual void on_disconnect(std::function<void()> fn) = 0;
    virtual bool disconnected() const = 0;
    // Called once, on the I/O thread, when the answer has been written or abandoned, with
    // the seconds spent writing it to the socket (the network-write stage).
    virtual void on_complete(std::function<void(double write_seconds)> fn) = 0;
};

// What a handler returns: a response now, or a function that receives the Responder.
struct Reply {
    Response now;
    std::function<void(std::shared_ptr<Responder>)> deferred;  // set: answer later

    static Reply later(std::function<void(std::shared_ptr<Responder>)> fn) {
        Reply r;
        r.deferred = std::move(fn);
        return r;
    }
};

using Handler = std::function<Reply(const Request&)>;

// The request's id for logs and the X-Request-Id answer: the client's X-Request-Id when it
// is a plain token (letters, digits, -_.:, at most 128 characters), else a new "req-..." one.
std::string request_id(const Request& req);
// `prefix` and 24 random hex digits (96 bits): request and completion ids.
std::string random_id(std::string_view prefix);

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8000;                   // 0 = any free port (see Server::port())
    size_t max_body_bytes = 8u << 20;  // larger bodies get 413
    int idle_timeout_s = 120;          // keep-alive connections idle this long are closed
};

class Server {
  public:
    ~Server();
    // Binds and starts the I/O thread. Errors: address in use, bad host.
    static Result<std::unique_ptr<Server>> start(const ServerOptions& opts, Handler handler);
    int port() const;
    // Stops accepting new connections (existing ones continue).
    void stop_accepting();
    // Closes everything and joins the I/O thread.
    void stop();
    int64_t open_connections() const;
    // Socket writes of streamed answers since start (head, chunks, end; a write the socket
    // takes in parts counts once).
    int64_t stream_writes() const;

  private:
    Server() = default;
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::http
