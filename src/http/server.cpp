// The only translation unit that includes Boost.Beast for serving.
#include "http/server.h"

#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <mutex>
#include <thread>

#include "base/log.h"
#include "base/thread_name.h"

namespace pagoda::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

namespace {

Response error_response(int status, std::string_view message, std::string_view type) {
    Response r;
    r.status = status;
    r.body = fmt::format(R"({{"error":{{"message":"{}","type":"{}","param":null,"code":{}}}}})",
                         json_escape(message), type, status);
    return r;
}

const char* reason(int status) {
    return bhttp::obsolete_reason(static_cast<bhttp::status>(status)).data();
}

asio::awaitable<bool> write_full(beast::tcp_stream& stream, const Response& r, bool keep_alive,
                                 unsigned version) {
    bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(r.status), version};
    res.set(bhttp::field::server, "pagoda");
    res.set(bhttp::field::content_type, r.content_type);
    for (const auto& [k, v] : r.headers) res.set(k, v);
    res.keep_alive(keep_alive);
    res.body() = r.body;
    res.prepare_payload();
    auto [ec, n] = co_await bhttp::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    co_return !ec;
}

// After an early answer (413, 431) to a request whose bytes are still coming: stop sending,
// then read and drop what the client still sends (at most `max_bytes`, for at most 2 s)
// before closing, so the client reads the answer instead of a reset (a proxy in front would
// otherwise see a broken pipe and call the backend failed).
asio::awaitable<void> linger_close(beast::tcp_stream& stream, size_t max_bytes) {
    boost::system::error_code ec;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
    std::vector<char> sink(64 * 1024);
    size_t dropped = 0;
    stream.expires_after(std::chrono::seconds(2));
    while (dropped < max_bytes) {
        auto [rec, n] = co_await stream.async_read_some(asio::buffer(sink),
                                                        asio::as_tuple(asio::use_awaitable));
        if (rec) break;
        dropped += n;
    }
    stream.expires_never();
}

// A chunk's end ("\r\n"), then the terminator that ends a chunked body ("0\r\n\r\n").
constexpr char kChunkEnd[] = "\r\n0\r\n\r\n";

// A chunk's size line: the size in hex and CRLF.
void append_chunk_size(std::string& out, size_t n) {
    char digits[2 * sizeof(size_t)];
    size_t k = 0;
    do {
        digits[k++] = "0123456789abcdef"[n & 15];
        n >>= 4;
    } while (n != 0);
    while (k > 0) out += digits[--k];
    out += "\r\n";
}

// Writes `bufs` on a non-blocking socket: at once when the socket takes them all (the usual
// case, a chunk being far smaller than the send buffer: no wait, no completion to run), else
// the rest when the socket can take it. Counted in `writes` (once, even when in parts).
template <class Buffers>
asio::awaitable<boost::system::error_code> send_all(tcp::socket& sock, const Buffers& bufs,
                                                    std::atomic<int64_t>& writes) {
    writes.fetch_add(1, std::memory_order_relaxed);
    boost::system::error_code ec;
    const size_t n = sock.write_some(bufs, ec);
    if (!ec && n == asio::buffer_size(bufs)) co_return ec;
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again) co_return ec;
    beast::buffers_suffix<Buffers> rest(bufs);
    rest.consume(ec ? 0 : n);
    std::tie(ec, std::ignore) =
        co_await asio::async_write(sock, rest, asio::as_tuple(asio::use_awaitable));
    co_return ec;
}

// The io_context whose thread is running here (set by Server::start's thread), if any.
thread_local const asio::io_context* t_running_io = nullptr;

// One deferred answer on one connection. Producers (any thread) queue items; the
// connection's coroutine writes them.
class ResponderImpl : public Responder, public std::enable_shared_from_this<ResponderImpl> {
  public:
    ResponderImpl(asio::any_io_executor ex, const asio::io_context& io,
                  std::atomic<int64_t>& stream_writes)
        : ex_(std::move(ex)), io_(io), timer_(ex_), stream_writes_(stream_writes) {
        timer_.expires_at(asio::steady_timer::time_point::max());
    }

    void send(Response r) override {
        Item it;
        it.kind = Item::kFull;
        it.full = std::move(r);
        push(std::move(it));
    }
    void start_stream(int status, std::string content_type,
                      std::vector<std::pair<std::string, std::string>> headers) override {
        Item it;
        it.kind = Item::kHead;
        it.full.status = status;
        it.full.content_type = std::move(content_type);
        it.full.headers = std::move(headers);
        push(std::move(it));
    }
    void write(std::string_view chunk) override {
        if (chunk.empty() || write_now(chunk)) return;
        push(Item::of(Item::kChunk, chunk));
    }
    void finish() override { push(Item::of(Item::kFinish)); }
    void write_last(std::string_view chunk) override {
        if (chunk.empty()) return finish();
        push(Item::of(Item::kChunk, chunk, true));
    }
    void post(std::function<void()> fn) override { asio::post(ex_, std::move(fn)); }
    void on_disconnect(std::function<void()> fn) override {
        std::lock_guard<std::mutex> lock(mu_);
        if (disconnected_) {
            asio::post(ex_, std::move(fn));
        } else {
            on_disc_ = std::move(fn);
        }
    }
    bool disconnected() const override {
        std::lock_guard<std::mutex> lock(mu_);
        return disconnected_;
    }
    void on_complete(std::function<void(double)> fn) override {
        std::lock_guard<std::mutex> lock(mu_);
        on_complete_ = std::move(fn);
    }

    // Runs on the connection's coroutine until the answer is complete or the client is
    // gone. Returns whether the connection may serve another request.
    asio::awaitable<bool> run(beast::tcp_stream& stream, bool keep_alive, unsigned version) {
        auto watch = watch_disconnect(stream);
        bool complete = false, ok = true;
        socket_ = &stream.socket();
        while (!complete && ok) {
            std::vector<Item>& batch = batch_;  // the two queues trade places: no allocation
            batch.clear();
            {
                std::lock_guard<std::mutex> lock(mu_);
                if (!writable() && !disconnected_) {
                    waiting_ = true;
                } else {
                    batch.swap(items_);
                }
            }
            if (batch.empty()) {
                if (disconnected()) {
                    ok = false;
                    break;
                }
                co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
                timer_.expires_at(asio::steady_timer::time_point::max());
                continue;
            }
            for (Item& it : batch) {
                const auto w0 = std::chrono::steady_clock::now();
                ok = co_await write_item(stream, it, *watch, keep_alive, version, complete);
                write_s_ +=
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
                if (!ok) {
                    mark_disconnected();
                    break;
                }
                if (complete) break;
            }
        }
        socket_ = nullptr;  // a producer's later write_now() must not reach the connection
        co_await close_answer(stream, *watch);
        co_return ok&& keep_alive && !watch->got_data;
    }

  private:
    struct Item;
    struct Watch;

    // A chunk written by its producer on the connection's own thread while the connection's
    // coroutine waits with nothing queued (a pump's write, the usual case): straight to the
    // socket, without waking the coroutine. What the socket does not take at once is queued
    // as it stands (already framed) and the coroutine writes it. False: not the case here;
    // the caller queues the chunk.
    bool write_now(std::string_view chunk) {
        if (t_running_io != &io_ || socket_ == nullptr || !streaming_) return false;
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (!waiting_ || !items_.empty() || closed_ || disconnected_) return false;
        }
        const auto w0 = std::chrono::steady_clock::now();
        std::string size;
        append_chunk_size(size, chunk.size());
        const std::array<asio::const_buffer, 3> framed = {asio::buffer(size),
                                                          asio::buffer(chunk.data(), chunk.size()),
                                                          asio::buffer(kChunkEnd, 2)};
        boost::system::error_code ec;
        stream_writes_.fetch_add(1, std::memory_order_relaxed);
        const size_t n = socket_->write_some(framed, ec);
        write_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
        if (!ec && n == asio::buffer_size(framed)) return true;
        if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
            mark_disconnected();
            timer_.cancel();  // the coroutine sees the disconnect and ends the answer
            return true;
        }
        Item rest = Item::of(Item::kRaw, size.append(chunk).append("\r\n"));
        rest.data.erase(0, ec ? 0 : n);
        push(std::move(rest));
        return true;
    }

    // Watches for the client going away while the answer is produced.
    std::shared_ptr<Watch> watch_disconnect(beast::tcp_stream& stream) {
        auto self = shared_from_this();
        auto watch = std::make_shared<Watch>();
        asio::co_spawn(
            ex_,
            [self, watch, &stream]() -> asio::awaitable<void> {
                char b[256];
                auto [ec, n] = co_await stream.socket().async_read_some(
                    asio::buffer(b), asio::as_tuple(asio::use_awaitable));
                watch->done = true;
                if (!ec) {
                    watch->got_data =
                        true;  // pipelined request: served by a new connection instead
                } else if (!watch->stopping) {
                    self->mark_disconnected();
                }
                self->timer_.cancel();
            },
            asio::detached);
        return watch;
    }

    // Writes one item: a whole response, the chunked head, a chunk, or the last chunk
    // (which, like a whole response, completes the answer). False when the write failed.
    asio::awaitable<bool> write_item(beast::tcp_stream& stream, Item& it, const Watch& watch,
                                     bool keep_alive, unsigned version, bool& complete) {
        boost::system::error_code ec;
        if (it.kind == Item::kFull) {
            complete = true;
            co_return co_await write_full(stream, it.full, keep_alive && !watch.got_data, version);
        }
        if (it.kind == Item::kHead) {
            std::string head = "HTTP/1.1 ";
            head += std::to_string(it.full.status);
            head += ' ';
            head += reason(it.full.status);
            head += "\r\nServer: pagoda\r\nContent-Type: ";
            head += it.full.content_type;
            head += "\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n";
            for (const auto& [k, v] : it.full.headers) head += k + ": " + v + "\r\n";
            head += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
            if (!it.data.empty()) append_chunk_size(head, it.data.size());
            // The first chunk (and the terminator) with the head: one write.
            const std::array<asio::const_buffer, 3> framed = {
                asio::buffer(head), asio::buffer(it.data),
                asio::buffer(&kChunkEnd[it.data.empty() ? 2 : 0],
                             (it.data.empty() ? 0 : 2) + (it.last ? 5 : 0))};
            ec = co_await send_all(stream.socket(), framed, stream_writes_);
            streaming_ = true;
        } else if (it.kind == Item::kRaw) {
            ec = co_await send_all(stream.socket(), asio::buffer(it.data), stream_writes_);
        } else if (it.kind == Item::kChunk && streaming_) {
            std::string size;
            append_chunk_size(size, it.data.size());
            // "\r\n" ends the chunk; "0\r\n\r\n" after it is the terminator (Item::last).
            const std::array<asio::const_buffer, 3> framed = {
                asio::buffer(size), asio::buffer(it.data),
                asio::buffer(kChunkEnd, it.last ? 7 : 2)};
            ec = co_await send_all(stream.socket(), framed, stream_writes_);
        } else if (it.kind == Item::kFinish) {
            if (streaming_) {
                ec = co_await send_all(stream.socket(), asio::buffer(&kChunkEnd[2], 5),
                                       stream_writes_);
            }
            complete = true;
        }
        if ((it.kind == Item::kChunk || it.kind == Item::kHead) && it.last) complete = true;
        co_return !ec;
    }

    // The answer is over: later pushes are dropped, on_complete runs, and the watcher stops
    // before the connection reads again.
    asio::awaitable<void> close_answer(beast::tcp_stream& stream, Watch& watch) {
        std::function<void(double)> done;
        {
            std::lock_guard<std::mutex> lock(mu_);
            closed_ = true;
            items_.clear();
            done = std::move(on_complete_);
        }
        if (done) done(write_s_);
        if (!watch.done) {
            watch.stopping = true;
            boost::system::error_code ignored;
            stream.socket().cancel(ignored);
            while (!watch.done) {
                co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
                timer_.expires_at(asio::steady_timer::time_point::max());
            }
        }
    }

    struct Item {
        // kRaw: the rest of a chunk write_now() began, framed already.
        enum Kind { kFull, kHead, kChunk, kRaw, kFinish } kind = kChunk;
        Response full;
        std::string data;
        // kHead: the first chunk's data, once pushed. kChunk or kHead: the answer ends after
        // it (a finish was pushed right after).
        bool last = false;
        static Item of(Kind k, std::string_view data = {}, bool last = false) {
            Item it;
            it.kind = k;
            it.data = data;
            it.last = last;
            return it;
        }
    };
    struct Watch {
        bool done = false, stopping = false, got_data = false;
    };

    void push(Item it) {
        std::lock_guard<std::mutex> lock(mu_);
        if (closed_ || disconnected_) return;
        // Chunks queued back to back go out as one chunk, one write (a step's tokens); the
        // head waits for the first chunk and goes out with it; the last chunk carries the
        // terminator when the finish follows it at once.
        Item* back = items_.empty() ? nullptr : &items_.back();
        const bool open =
            back && (back->kind == Item::kChunk || back->kind == Item::kHead) && !back->last;
        if (open && it.kind == Item::kChunk) {
            back->data += it.data;
            back->last = it.last;
        } else if (open && it.kind == Item::kFinish) {
            back->last = true;
        } else {
            items_.push_back(std::move(it));
        }
        if (waiting_ && writable()) {
            waiting_ = false;
            // On the connection's own thread (a pump) the waiting coroutine is woken at once;
            // from another thread the wake goes through the executor.
            if (t_running_io == &io_) {
                timer_.cancel();
            } else {
                asio::post(ex_, [self = shared_from_this()] { self->timer_.cancel(); });
            }
        }
    }

    // Whether the queue holds something to write now: not only a head still waiting for its
    // first chunk (guarded by mu_).
    bool writable() const {
        if (items_.empty()) return false;
        const Item& f = items_.front();
        return items_.size() > 1 || f.kind != Item::kHead || !f.data.empty() || f.last;
    }

    void mark_disconnected() {
        std::function<void()> cb;
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (disconnected_ || closed_) return;
            disconnected_ = true;
            cb = std::move(on_disc_);
        }
        if (cb) cb();
    }

    asio::any_io_executor ex_;
    const asio::io_context& io_;
    asio::steady_timer timer_;
    mutable std::mutex mu_;
    std::vector<Item> items_;
    std::vector<Item> batch_;  // what run() writes now (the connection's coroutine only)
    bool waiting_ = false, disconnected_ = false, closed_ = false;
    std::function<void()> on_disc_;
    std::function<void(double)> on_complete_;  // guarded by mu_
    // The connection's thread only: the time spent writing, the socket while run() runs,
    // whether the chunked head went out.
    double write_s_ = 0;
    std::atomic<int64_t>& stream_writes_;  // the server's count
    tcp::socket* socket_ = nullptr;
    bool streaming_ = false;
};

}  // namespace

struct Server::Impl {
    asio::io_context io{1};
    tcp::acceptor acceptor{io};
    ServerOptions opts;
    Handler handler;
    std::thread thread;
    std::atomic<int64_t> connections{0};
    std::atomic<int64_t> stream_writes{0};
    int port = 0;

    // A request that could not be read: an answer where one helps (413, 431, 400), nothing
    // when the client went away or idled out.
    asio::awaitable<void> refuse(beast::tcp_stream& stream, boost::system::error_code ec) {
        if (ec == bhttp::error::body_limit) {
            co_await write_full(
                stream,
                error_response(
                    413, fmt::format("request body larger than {} bytes", opts.max_body_bytes),
                    "invalid_request_error"),
                false, 11);
            co_await linger_close(stream, opts.max_body_bytes * 2 + (1u << 20));
            co_return;
        }
        if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
            co_await write_full(stream,
                                error_response(431,
                                               "request header fields too large (the headers "
                                               "of a request may take at most 8 KiB)",
                                               "invalid_request_error"),
                                false, 11);
            co_await linger_close(stream, 1u << 20);
            co_return;
        }
        if (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
            ec == asio::error::connection_reset || ec == beast::error::timeout ||
            ec == asio::error::operation_aborted) {
            co_return;
        }
        co_await write_full(
            stream,
            error_response(400, fmt::format("malformed HTTP request: {}", ec.message()),
                           "invalid_request_error"),
            false, 11);
    }

    static Request to_request(bhttp::request<bhttp::string_body>& req, const std::string& remote) {
        Request r;
        r.method = std::string(req.method_string());
        r.target = std::string(req.target());
        r.path = r.target.substr(0, r.target.find('?'));
        r.body = std::move(req.body());
        r.remote = remote;
        for (const auto& f : req) {
            std::string name(f.name_string());
            for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
            r.headers.emplace_back(std::move(name), std::string(f.value()));
        }
        return r;
    }

    asio::awaitable<void> session(tcp::socket sock) {
        ++connections;
        struct Count {
            std::atomic<int64_t>& c;
            ~Count() { --c; }
        } count{connections};
        std::string remote;
        {
            boost::system::error_code ec;
            auto ep = sock.remote_endpoint(ec);
            if (!ec) remote = ep.address().to_string() + ":" + std::to_string(ep.port());
        }
        // Non-blocking: streamed chunks are written at once where the socket takes them.
        boost::system::error_code nb_ec;
        sock.non_blocking(true, nb_ec);
        beast::tcp_stream stream(std::move(sock));
        beast::flat_buffer buf;
        for (;;) {
            bhttp::request_parser<bhttp::string_body> parser;
            parser.body_limit(opts.max_body_bytes);
            stream.expires_after(std::chrono::seconds(opts.idle_timeout_s));
            auto [ec, n] = co_await bhttp::async_read(stream, buf, parser,
                                                      asio::as_tuple(asio::use_awaitable));
            stream.expires_never();
            if (ec) {
                co_await refuse(stream, ec);
                break;
            }
            auto& req = parser.get();
            Request r = to_request(req, remote);
            const bool keep_alive = req.keep_alive();
            const unsigned version = req.version();
            Reply reply;
            try {
                reply = handler(r);
            } catch (const std::exception& e) {
                log_warn("handler_threw method={} path={} error=\"{}\"", r.method, r.path,
                         e.what());
                reply = Reply{error_response(500, "internal error", "internal_error"), {}};
            }
            if (!reply.deferred) {
                const bool ok = co_await write_full(stream, reply.now, keep_alive, version);
                if (!ok || !keep_alive) break;
                continue;
            }
            auto responder =
                std::make_shared<ResponderImpl>(stream.get_executor(), io, stream_writes);
            reply.deferred(responder);
            const bool again = co_await responder->run(stream, keep_alive, version);
            if (!again) break;
        }
        boost::system::error_code ignored;
        stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
        stream.socket().close(ignored);
    }

    asio::awaitable<void> accept_loop() {
        for (;;) {
            auto [ec, sock] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
            if (ec) {
                if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
                continue;  // e.g. too many open files: keep serving the others
            }
            sock.set_option(tcp::no_delay(true));
            asio::co_spawn(io, session(std::move(sock)), asio::detached);
        }
    }
};

Server::~Server() { stop(); }

Result<std::unique_ptr<Server>> Server::start(const ServerOptions& opts, Handler handler) {
    std::unique_ptr<Server> s(new Server());
    s->impl_ = std::make_unique<Impl>();
    Impl& im = *s->impl_;
    im.opts = opts;
    im.handler = std::move(handler);
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(opts.host, ec);
    if (ec)
        return make_error(ErrorCode::kInvalidArgument, "--host '{}' is not an IP address: {}",
                          opts.host, ec.message());
    if (opts.port < 0 || opts.port > 65535) {
        return make_error(ErrorCode::kInvalidArgument, "--port must be in [0, 65535], got {}",
                          opts.port);
    }
    const tcp::endpoint ep(addr, static_cast<unsigned short>(opts.port));
    im.acceptor.open(ep.protocol(), ec);
    if (!ec) im.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) im.acceptor.bind(ep, ec);
    if (!ec) im.acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
        return make_error(ErrorCode::kIo, "cannot listen on {}:{}: {}", opts.host, opts.port,
                          ec.message());
    im.port = im.acceptor.local_endpoint().port();
    asio::co_spawn(im.io, im.accept_loop(), asio::detached);
    im.thread = std::thread([&im] {
        set_thread_name("pagoda-http");
        t_running_io = &im.io;
        im.io.run();
    });
    return s;
}

int Server::port() const { return impl_->port; }

int64_t Server::open_connections() const { return impl_->connections.load(); }
int64_t Server::stream_writes() const { return impl_->stream_writes.load(); }

void Server::stop_accepting() {
    asio::post(impl_->io, [im = impl_.get()] {
        boost::system::error_code ignored;
        im->acceptor.close(ignored);
    });
}

void Server::stop() {
    if (!impl_ || !impl_->thread.joinable()) return;
    impl_->io.stop();
    impl_->thread.join();
}

}  // namespace pagoda::http
