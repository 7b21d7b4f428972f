// The HTTP server on loopback, spoken to over raw sockets: keep-alive, pipelining, body
// limits, malformed requests, handler exceptions, deferred and streamed answers, and
// client disconnects seen while an answer is pending.
#include "http/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <thread>
#include <vector>

#include "base/log.h"

namespace pagoda::http {
namespace {

using namespace std::chrono_literals;

struct Running {
    std::unique_ptr<Server> server;
    int port = 0;
};

Running start(Handler h, size_t max_body = 1024) {
    ServerOptions o;
    o.port = 0;
    o.max_body_bytes = max_body;
    auto s = Server::start(o, std::move(h));
    EXPECT_TRUE(s.ok()) << s.error().message;
    Running r;
    r.server = std::move(s).value();
    r.port = r.server->port();
    return r;
}

int connect_to(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
}

void send_all(int fd, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
        const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
        if (n <= 0) return;
        off += size_t(n);
    }
}

// Reads until the server closes the connection or 5 s pass.
std::string read_until_close(int fd) {
    std::string out;
    char buf[4096];
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < deadline) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        out.append(buf, size_t(n));
    }
    return out;
}

std::string round_trip(int port, const std::string& raw) {
    const int fd = connect_to(port);
    send_all(fd, raw);
    std::string out = read_until_close(fd);
    ::close(fd);
    return out;
}

int count(const std::string& hay, const std::string& needle) {
    int n = 0;
    for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
    return n;
}

Reply echo(const Request& r) {
    Response resp;
    resp.body = r.method + " " + r.path + " " + r.body;
    return Reply{resp, {}};
}

TEST(HttpServer, KeepAliveAnswersSeveralRequestsOnOneConnection) {
    auto s = start(echo);
    const std::string out =
        round_trip(s.port,
                   "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                   "POST /b?q=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                   "GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(count(out, "HTTP/1.1 200"), 3) << out;
    EXPECT_NE(out.find("GET /a "), std::string::npos);
    EXPECT_NE(out.find("POST /b hello"), std::string::npos) << "path without the query";
    EXPECT_NE(out.find("GET /c "), std::string::npos);
}

TEST(HttpServer, BodyOverTheLimitIs413AndNamesTheLimit) {
    int calls = 0;
    auto s = start([&](const Request& r) {
        ++calls;
        return echo(r);
    });
    const std::string out =
        round_trip(s.port, "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n" +
                               std::string(2000, 'x'));
    EXPECT_NE(out.find("HTTP/1.1 413"), std::string::npos) << out;
    EXPECT_NE(out.find("request body larger than 1024 bytes"), std::string::npos) << out;
    EXPECT_EQ(calls, 0);
    // A body at the limit is fine.
    const std::string ok = round_trip(
        s.port,
        "POST /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 1024\r\n\r\n" +
            std::string(1024, 'y'));
    EXPECT_NE(ok.find("HTTP/1.1 200"), std::string::npos);
}

TEST(HttpServer, MalformedRequestsGet400AndTheConnectionCloses) {
    auto s = start(echo);
    for (const std::string& raw : {std::string("NOT HTTP AT ALL\r\n\r\n"),
                                   std::string("GET /x HTTP/1.1\r\nContent-Length: abc\r\n\r\n"),
                                   std::string("GET /x HTTP/9.9\r\nHost: x\r\n\r\n")}) {
        const std::string out = round_trip(s.port, raw);
        EXPECT_NE(out.find("HTTP/1.1 400"), std::string::npos) << raw << " -> " << out;
        EXPECT_NE(out.find("malformed HTTP request"), std::string::npos) << out;
    }
    // The server still serves afterwards.
    EXPECT_NE(round_trip(s.port, "GET /y HTTP/1.1\r\nConnection: close\r\n\r\n").find("GET /y"),
              std::string::npos);
}

TEST(HttpServer, AHandlerThatThrowsGives500NotACrash) {
    set_log_level(LogLevel::kError);
    auto s = start([](const Request&) -> Reply { throw std::runtime_error("boom"); });
    const std::string out = round_trip(s.port, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
    EXPECT_NE(out.find("HTTP/1.1 500"), std::string::npos) << out;
    set_log_level(LogLevel::kInfo);
}

TEST(HttpServer, DeferredStreamIsChunked) {
    auto s = start([](const Request&) {
        return Reply::later([](std::shared_ptr<Responder> r) {
            std::thread([r] {
                r->start_stream(200, "text/event-stream");
                r->write("data: one\n\n");
                r->write("data: two\n\n");
                r->finish();
            }).detach();
        });
    });
    const std::string out = round_trip(s.port, "GET /s HTTP/1.1\r\nConnection: close\r\n\r\n");
    EXPECT_NE(out.find("Transfer-Encoding: chunked"), std::string::npos) << out;
    EXPECT_NE(out.find("text/event-stream"), std::string::npos);
    EXPECT_NE(out.find("data: one"), std::string::npos);
    EXPECT_NE(out.find("data: two"), std::string::npos);
    EXPECT_NE(out.find("\r\n0\r\n\r\n"), std::string::npos) << "the last chunk ends the body";
}

// The body of a chunked answer (`raw` holds head and body), chunks joined; "" if malformed.
std::string dechunk(const std::string& raw) {
    size_t p = raw.find("\r\n\r\n");
    if (p == std::string::npos) return "";
    p += 4;
    std::string body;
    for (;;) {
        const size_t eol = raw.find("\r\n", p);
        if (eol == std::string::npos) return "";
        const size_t n = std::stoul(raw.substr(p, eol - p), nullptr, 16);
        if (n == 0) return body;
        if (eol + 2 + n + 2 > raw.size()) return "";
        body.append(raw, eol + 2, n);
        p = eol + 2 + n + 2;
    }
}

// Sends a request for a streamed answer, reads nothing for 300 ms (the server's writes fill
// the socket meanwhile), then reads the answer and checks its body is `want`.
void expect_late_read_body(int port, const std::string& want) {
    const int fd = connect_to(port);
    send_all(fd, "GET /big HTTP/1.1\r\nConnection: close\r\n\r\n");
    std::this_thread::sleep_for(300ms);
    const std::string out = read_until_close(fd);
    ::close(fd);
    const std::string body = dechunk(out);
    EXPECT_EQ(body.size(), want.size());
    EXPECT_TRUE(body == want) << "the streamed bytes differ from what was written";
}

// Chunks far larger than the socket takes at once (the client reads late): what the
// non-blocking write leaves is written when the socket drains, every byte in order.
TEST(HttpServer, ChunksLargerThanTheSocketTakesArriveWhole) {
    std::string want;
    std::vector<std::string> chunks;
    for (int i = 0; i < 4; ++i) {
        std::string c(size_t(4) << 20, '\0');
        for (size_t k = 0; k < c.size(); ++k) c[k] = char('a' + (k * 7 + size_t(i)) % 26);
        want += c;
        chunks.push_back(std::move(c));
    }
    auto s = start([&chunks](const Request&) {
        return Reply::later([&chunks](std::shared_ptr<Responder> r) {
            std::thread([r, &chunks] {
                r->start_stream(200, "application/octet-stream");
                for (const auto& c : chunks) r->write(c);
                r->finish();
            }).detach();
        });
    });
    expect_late_read_body(s.port, want);
}

// Written as a pump writes, on the connection's own thread: straight to the socket while the
// connection waits (small chunks), what the socket does not take queued as it stands (large
// chunks, the client reading late), then straight again once it drained, and the end with
// write_last. Every byte arrives, in order.
TEST(HttpServer, ChunksWrittenOnTheConnectionsThreadArriveWhole) {
    auto text = [](size_t n, size_t seed) {
        std::string c(n, '\0');
        for (size_t k = 0; k < n; ++k) c[k] = char('a' + (k * 7 + seed) % 26);
        return c;
    };
    std::vector<std::string> before, after;
    for (size_t i = 0; i < 50; ++i) before.push_back(text(100 + i, i));
    for (size_t i = 0; i < 3; ++i) before.push_back(text(size_t(3) << 20, i));
    for (size_t i = 0; i < 50; ++i) after.push_back(text(200 + i, i + 3));
    const std::string last = "data: [DONE]\n\n";
    std::string want = "first\n";
    for (const auto& c : before) want += c;
    for (const auto& c : after) want += c;
    want += last;
    auto s = start([&](const Request&) {
        return Reply::later([&](std::shared_ptr<Responder> r) {
            r->start_stream(200, "text/event-stream");
            r->write("first\n");  // with the head (the connection has not started writing)
            r->post([r, &before] {
                for (const auto& c : before) r->write(c);
            });
            std::thread([r, &after, &last] {
                std::this_thread::sleep_for(1500ms);  // the client has read it all meanwhile
                r->post([r, &after, &last] {
                    for (const auto& c : after) r->write(c);
                    r->write_last(last);
                });
            }).detach();
        });
    });
    expect_late_read_body(s.port, want);
}

// What arrives within `wait` of the first byte (one write of the server's, on loopback).
std::string read_burst(int fd, std::chrono::milliseconds wait) {
    std::string out;
    char buf[4096];
    for (int waited = 0; waited < 5000; waited += 10) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, out.empty() ? 10 : int(wait.count())) <= 0) {
            if (out.empty()) continue;
            break;
        }
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        out.append(buf, size_t(n));
    }
    return out;
}

// A stream's writes are few: the head waits for the first chunk and goes out with it (no
// byte before it), and the last chunk carries the terminator (the bytes are checked here;
// that it is one write shows in strace).
// A server whose handler runs `setup` on its responder and hands it out, with one request
// sent on a connection of its own.
struct Held {
    std::promise<std::shared_ptr<Responder>> pending;
    Running server;
    int fd = -1;
    // The responder of the request sent (null when the handler did not run within 5 s).
    std::shared_ptr<Responder> take() {
        auto f = pending.get_future();
        return f.wait_for(5s) == std::future_status::ready ? f.get() : nullptr;
    }
};

std::unique_ptr<Held> hold(std::function<void(Responder&)> setup) {
    auto h = std::make_unique<Held>();
    h->server = start([h = h.get(), setup](const Request&) {
        return Reply::later([h, setup](std::shared_ptr<Responder> r) {
            setup(*r);
            h->pending.set_value(r);
        });
    });
    h->fd = connect_to(h->server.port);
    send_all(h->fd, "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n");
    return h;
}

TEST(HttpServer, StreamHeadGoesWithTheFirstChunkAndTheEndWithTheLast) {
    auto h = hold([](Responder& r) { r.start_stream(200, "text/event-stream"); });
    std::shared_ptr<Responder> r = h->take();
    ASSERT_NE(r, nullptr);
    const int fd = h->fd;
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 200), 0) << "no head before the first chunk";
    r->write("data: one\n\n");
    const std::string first = read_burst(fd, 200ms);
    EXPECT_EQ(first.find("HTTP/1.1 200"), 0u) << first;
    EXPECT_NE(first.find("\r\n\r\nb\r\ndata: one\n\n\r\n"), std::string::npos) << first;
    r->write("data: two\n\n");
    r->finish();
    EXPECT_EQ(read_burst(fd, 200ms), "b\r\ndata: two\n\n\r\n0\r\n\r\n");
    ::close(fd);
}

TEST(HttpServer, ClientGoneWhileAnswerPendingIsReported) {
    std::promise<void> gone;
    auto h = hold([&](Responder& r) { r.on_disconnect([&] { gone.set_value(); }); });
    std::shared_ptr<Responder> held = h->take();
    ASSERT_NE(held, nullptr);
    ::close(h->fd);
    EXPECT_EQ(gone.get_future().wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(held->disconnected());
    held->send(Response{});  // a no-op after the disconnect, not a crash
}

}  // namespace
}  // namespace pagoda::http
