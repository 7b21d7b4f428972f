// The HTTP client against raw-socket servers on loopback that misbehave as real servers do:
// one that closes each keep-alive connection a few milliseconds after answering (as
// llama.cpp's server does with idle connections), and one that closes every connection
// without answering. A request that meets a stale pooled connection is retried once on a
// fresh one and succeeds; a failure on a fresh connection stays an error.
#include "http/client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

namespace pagoda::http {
namespace {

using namespace std::chrono_literals;

// Accepts connections on a loopback port. Each connection: read one request (up to the
// blank line and Content-Length bytes), answer 200 "ok" with keep-alive unless `answer` is
// false, then close after a random 0-4 ms. One thread per connection.
class ClosingServer {
  public:
    explicit ClosingServer(bool answer) : answer_(answer) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        const int one = 1;
        ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
        socklen_t len = sizeof a;
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
        port_ = ntohs(a.sin_port);
        ::listen(fd_, 64);
        thread_ = std::thread([this] { accept_loop(); });
    }
    ~ClosingServer() {
        stop_ = true;
        ::shutdown(fd_, SHUT_RDWR);
        ::close(fd_);
        thread_.join();
        for (auto& t : conns_) t.join();
    }
    int port() const { return port_; }
    int connections() const { return accepted_.load(); }

  private:
    void accept_loop() {
        while (!stop_) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            const int c = ::accept(fd_, nullptr, nullptr);
            if (c < 0) continue;
            ++accepted_;
            conns_.emplace_back([this, c, seed = accepted_.load()] { serve(c, seed); });
        }
    }
    void serve(int c, int seed) {
        std::string got;
        char buf[4096];
        while (got.find("\r\n\r\n") == std::string::npos) {
            const ssize_t n = ::recv(c, buf, sizeof buf, 0);
            if (n <= 0) break;
            got.append(buf, size_t(n));
        }
        if (answer_ && got.find("\r\n\r\n") != std::string::npos) {
            const std::string reply =
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok";
            ::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
            std::this_thread::sleep_for(std::chrono::microseconds(std::mt19937(seed)() % 4000));
        }
        ::close(c);
    }

    bool answer_;
    int fd_ = -1, port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> accepted_{0};
    std::thread thread_;
    std::vector<std::thread> conns_;  // accept thread only, joined after it
};

ClientRequest post_x() {
    ClientRequest r;
    r.path = "/x";
    r.body = "{}";
    return r;
}

TEST(HttpClient, StalePooledConnectionsAreRetriedOnAFreshOne) {
    ClosingServer srv(true);
    auto c = Client::create("http://127.0.0.1:" + std::to_string(srv.port()));
    ASSERT_TRUE(c.ok()) << c.error().message;
    std::mt19937 rng(3);
    int ok = 0;
    std::vector<std::string> errors;
    for (int i = 0; i < 200; ++i) {
        // Gaps of 0-6 ms: the pooled connection is sometimes still open, often closed.
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 6000));
        auto r = (*c)->fetch(post_x());
        if (r.ok() && r->status == 200 && r->body == "ok") {
            ++ok;
        } else {
            errors.push_back(r.ok() ? std::to_string(r->status) : r.error().message);
        }
    }
    EXPECT_EQ(ok, 200) << (errors.empty() ? "" : errors[0]);
    EXPECT_GT((*c)->retries(), 0) << "the server closed idle connections: some were stale";
    EXPECT_EQ((*c)->connections_opened(), int64_t(srv.connections()));
}

TEST(HttpClient, FailureOnAFreshConnectionIsAnError) {
    ClosingServer srv(false);
    auto c = Client::create("http://127.0.0.1:" + std::to_string(srv.port()));
    ASSERT_TRUE(c.ok());
    auto r = (*c)->fetch(post_x());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("closed the connection"), std::string::npos)
        << r.error().message;
    EXPECT_EQ((*c)->retries(), 0);
    EXPECT_EQ(srv.connections(), 1) << "not sent again";
}

}  // namespace
}  // namespace pagoda::http
