// The only translation unit that includes Boost.Beast for the client side.
#include "http/client.h"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

namespace pagoda::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

const char* client_error_kind_name(ClientError::Kind kind) {
    switch (kind) {
        case ClientError::Kind::kConnect: return "connect";
        case ClientError::Kind::kTimeout: return "timeout";
        case ClientError::Kind::kIo: return "io";
        case ClientError::Kind::kProtocol: return "protocol";
        case ClientError::Kind::kCancelled: return "cancelled";
    }
    return "io";
}

struct CallState {
    bool cancelled = false;
    beast::tcp_stream* stream = nullptr;  // the connection the request is using now
};

struct Client::Impl : std::enable_shared_from_this<Client::Impl> {
    Url url;
    ClientOptions opts;
    asio::io_context ioc;
    asio::executor_work_guard<asio::io_context::executor_type> work{ioc.get_executor()};
    std::thread thread;
    std::vector<std::unique_ptr<beast::tcp_stream>> idle;  // I/O thread only
    std::atomic<int64_t> in_flight{0};
    std::atomic<int64_t> opened{0};
    std::atomic<int64_t> retries{0};

    asio::awaitable<std::unique_ptr<beast::tcp_stream>> connect() {
        auto s = std::make_unique<beast::tcp_stream>(ioc);
        tcp::resolver resolver(ioc);
        s->expires_after(std::chrono::milliseconds(int64_t(opts.connect_timeout_s * 1000)));
        auto results = co_await resolver.async_resolve(url.host, url.port, asio::use_awaitable);
        co_await s->async_connect(results, asio::use_awaitable);
        opened.fetch_add(1, std::memory_order_relaxed);
        co_return s;
    }

    bhttp::request<bhttp::string_body> to_http(ClientRequest& req) const {
        bhttp::request<bhttp::string_body> hreq{bhttp::verb::get, url.base_path + req.path, 11};
        auto verb = bhttp::string_to_verb(req.method);
        hreq.method(verb == bhttp::verb::unknown ? bhttp::verb::get : verb);
        hreq.set(bhttp::field::host, url.host + ":" + url.port);
        hreq.set(bhttp::field::user_agent, opts.user_agent);
        hreq.keep_alive(true);
        for (const auto& [k, v] : opts.headers) hreq.set(k, v);
        for (const auto& [k, v] : req.headers) hreq.set(k, v);
        if (!req.body.empty() || req.method == "POST") {
            hreq.set(bhttp::field::content_type, req.content_type);
            hreq.body() = std::move(req.body);
            hreq.prepare_payload();
        }
        return hreq;
    }

    // The answer's status and body, handed over as they come; the connection back to the
    // pool when the server keeps it alive.
    asio::awaitable<void> read_body(std::unique_ptr<beast::tcp_stream> s, beast::flat_buffer& buf,
                                    bhttp::response_parser<bhttp::buffer_body>& parser,
                                    const ClientCallbacks& cb, CallState& st) {
        if (cb.on_status) cb.on_status(int(parser.get().result_int()));
        char tmp[16384];
        while (!parser.is_done()) {
            parser.get().body().data = tmp;
            parser.get().body().size = sizeof(tmp);
            s->expires_after(std::chrono::milliseconds(int64_t(opts.read_timeout_s * 1000)));
            auto [ec, n] = co_await bhttp::async_read_some(*s, buf, parser,
                                                           asio::as_tuple(asio::use_awaitable));
            if (ec && ec != bhttp::error::need_buffer) throw boost::system::system_error(ec);
            size_t got = sizeof(tmp) - parser.get().body().size;
            if (got > 0 && cb.on_body) cb.on_body(std::string_view(tmp, got));
        }
        st.stream = nullptr;
        if (parser.get().keep_alive() && !st.cancelled) {
            s->expires_never();
            idle.push_back(std::move(s));
        }
    }

    ClientError classify(const boost::system::system_error& e, bool cancelled) const {
        ClientError err;
        err.kind =
            e.code() == beast::error::timeout ? ClientError::Kind::kTimeout
            : e.code().category() == bhttp::make_error_code(bhttp::error::bad_version).category()
                ? ClientError::Kind::kProtocol
                : ClientError::Kind::kIo;
        if (cancelled) {
            err.kind = ClientError::Kind::kCancelled;
            err.message = "cancelled";
        } else if (e.code() == beast::error::timeout) {
            err.message = fmt::format("no answer within {} s", opts.read_timeout_s);
        } else if (e.code() == bhttp::error::end_of_stream || e.code() == asio::error::eof ||
                   e.code() == asio::error::connection_reset) {
            err.kind = ClientError::Kind::kIo;
            err.message = "the server closed the connection before the response was complete";
        } else {
            err.message = e.code().message();
        }
        return err;
    }

    asio::awaitable<void> run(ClientRequest req, ClientCallbacks cb,
                              std::shared_ptr<CallState> st) {
        ClientError err;
        bool failed = false;
        try {
            if (st->cancelled) throw boost::system::system_error(asio::error::operation_aborted);
            bhttp::request<bhttp::string_body> hreq = to_http(req);
            // A pooled connection the server closed while it sat idle fails before any byte
            // of the answer arrives: send once more on a fresh connection (what HTTP clients
            // do for a stale keep-alive connection). A fresh connection's failure is final.
            std::unique_ptr<beast::tcp_stream> s;
            beast::flat_buffer buf;
            std::optional<bhttp::response_parser<bhttp::buffer_body>> parser;
            bool sent_reported = false;
            for (int attempt = 0;; ++attempt) {
                const bool reused = attempt == 0 && !idle.empty();
                if (reused) {
                    s = std::move(idle.back());
                    idle.pop_back();
                } else {
                    try {
                        s = co_await connect();
                    } catch (const boost::system::system_error& e) {
                        err.kind = e.code() == beast::error::timeout ? ClientError::Kind::kTimeout
                                                                     : ClientError::Kind::kConnect;
                        err.message = fmt::format("cannot connect to {}:{}: {}", url.host, url.port,
                                                  e.code().message());
                        failed = true;
                        break;
                    }
                }
                if (st->cancelled)
                    throw boost::system::system_error(asio::error::operation_aborted);
                st->stream = s.get();
                try {
                    parser.emplace();
                    parser->body_limit(boost::none);
                    s->expires_after(
                        std::chrono::milliseconds(int64_t(opts.read_timeout_s * 1000)));
                    co_await bhttp::async_write(*s, hreq, asio::use_awaitable);
                    if (cb.on_sent && !sent_reported) cb.on_sent();
                    sent_reported = true;
                    co_await bhttp::async_read_header(*s, buf, *parser, asio::use_awaitable);
                    break;
                } catch (const boost::system::system_error& e) {
                    if (reused && !parser->got_some() && buf.size() == 0 &&
                        e.code() != beast::error::timeout) {
                        retries.fetch_add(1, std::memory_order_relaxed);
                        if (cb.on_retry) cb.on_retry();
                        s.reset();
                        continue;
                    }
                    throw;
                }
            }
            if (!failed) {
                co_await read_body(std::move(s), buf, *parser, cb, *st);
            }
        } catch (const boost::system::system_error& e) {
            failed = true;
            err = classify(e, st->cancelled);
        } catch (const std::exception& e) {
            failed = true;
            err.kind = ClientError::Kind::kProtocol;
            err.message = e.what();
        }
        st->stream = nullptr;
        in_flight.fetch_sub(1, std::memory_order_relaxed);
        if (cb.on_done) cb.on_done(failed ? &err : nullptr);
    }
};

Client::~Client() {
    if (!impl_) return;
    impl_->work.reset();
    impl_->ioc.stop();
    if (impl_->thread.joinable()) impl_->thread.join();
}

Result<std::unique_ptr<Client>> Client::create(std::string_view base_url, ClientOptions opts) {
    PAGODA_ASSIGN_OR_RETURN(Url url, parse_url(base_url));
    std::unique_ptr<Client> c(new Client());
    c->impl_ = std::make_shared<Impl>();
    c->impl_->url = std::move(url);
    c->impl_->opts = std::move(opts);
    Impl* impl = c->impl_.get();
    impl->thread = std::thread([impl] { impl->ioc.run(); });
    return c;
}

const Url& Client::url() const { return impl_->url; }

namespace {

class Pending final : public PendingCall {
  public:
    Pending(std::weak_ptr<Client::Impl> impl, std::shared_ptr<CallState> st)
        : impl_(std::move(impl)), st_(std::move(st)) {}
    void cancel() override;

  private:
    std::weak_ptr<Client::Impl> impl_;
    std::shared_ptr<CallState> st_;
};

}  // namespace

void Pending::cancel() {
    auto impl = impl_.lock();
    if (!impl) return;
    asio::post(impl->ioc, [st = st_] {
        st->cancelled = true;
        if (st->stream != nullptr) {
            boost::system::error_code ec;
            st->stream->socket().shutdown(tcp::socket::shutdown_both, ec);
            st->stream->socket().close(ec);
        }
    });
}

std::shared_ptr<PendingCall> Client::start(ClientRequest req, ClientCallbacks cb) {
    impl_->in_flight.fetch_add(1, std::memory_order_relaxed);
    Impl* impl = impl_.get();
    auto st = std::make_shared<CallState>();
    asio::post(impl->ioc, [impl, st, req = std::move(req), cb = std::move(cb)]() mutable {
        asio::co_spawn(impl->ioc, impl->run(std::move(req), std::move(cb), st), asio::detached);
    });
    return std::make_shared<Pending>(impl_, st);
}

Result<ClientResponse> Client::fetch(ClientRequest req) {
    auto done = std::make_shared<std::promise<Result<ClientResponse>>>();
    auto resp = std::make_shared<ClientResponse>();
    ClientCallbacks cb;
    cb.on_status = [resp](int status) { resp->status = status; };
    cb.on_body = [resp](std::string_view b) { resp->body.append(b); };
    cb.on_done = [done, resp](const ClientError* e) {
        if (e) {
            done->set_value(Error{ErrorCode::kIo, e->message});
        } else {
            done->set_value(std::move(*resp));
        }
    };
    auto fut = done->get_future();
    start(std::move(req), std::move(cb));
    return fut.get();
}

int64_t Client::in_flight() const { return impl_->in_flight.load(std::memory_order_relaxed); }
int64_t Client::connections_opened() const { return impl_->opened.load(std::memory_order_relaxed); }

int64_t Client::retries() const { return impl_->retries.load(std::memory_order_relaxed); }

}  // namespace pagoda::http
