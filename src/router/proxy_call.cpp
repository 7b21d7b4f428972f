// One proxied request (see router.h): backend choice, forwarding, retries before the first
// byte, and resumption of a stream whose backend failed mid-stream.
#include <fmt/format.h>

#include <algorithm>

#include "base/log.h"
#include "router/router_core.h"
#include "router/sse.h"

namespace pagoda::router {

using json = nlohmann::json;

namespace {

json error_body(int status, const std::string& msg, const std::string& type) {
    return {{"error", {{"message", msg}, {"type", type}, {"param", nullptr}, {"code", status}}}};
}

// Fields a resumed request cannot carry over when it resumes from text on a backend that is
// not Pagoda (the prompt changes shape, and chat-only fields do not apply to
// /v1/completions).
const char* const kTextResumeDropped[] = {"n",    "stream_options", "logprobs", "top_logprobs",
                                          "echo", "suffix",         "best_of",  "return_token_ids"};
// Fields a resumption on a Pagoda backend drops: the request keeps its endpoint, messages,
// tools, tool_choice, response_format and guided_* (the replica replays the tokens already
// sent, resume_token_ids, through the grammar and the tool-call parser).
const char* const kIdResumeDropped[] = {"n",      "stream_options", "echo",
                                        "suffix", "best_of",        "max_completion_tokens"};

struct ClientBody {
    std::string path, body;
};

class ProxyCall : public std::enable_shared_from_this<ProxyCall> {
  public:
    ProxyCall(std::shared_ptr<Core> core, CallInput in, std::shared_ptr<http::Responder> resp)
        : core_(std::move(core)), in_(std::move(in)), resp_(std::move(resp)) {
        t_start_ = core_->now_s();
    }
    void start();

  private:
    void attempt();          // mu_ held
    ClientBody next_body();  // mu_ held: the body and path of the next upstream request
    void on_status(int a, int status);
    void on_body(int a, std::string_view data);
    void on_done(int a, const http::ClientError* err);
    void upstream_failed(const std::string& why);                               // mu_ held
    void on_event(const std::string& data);                                     // mu_ held
    void forward(json& choice, const json& chunk, const std::string& raw);      // mu_ held
    void write_client(const std::string& data);                                 // mu_ held
    void finish_stream();                                                       // mu_ held
    void reply_now(int status, const json& body, bool retry_after = false);     // mu_ held
    void fail_stream(const std::string& msg);                                   // mu_ held
    void done(int code);                                                        // mu_ held
    void access(int status, int64_t prompt_tokens, int64_t completion_tokens);  // mu_ held
    bool resumable() const;
    int64_t generated() const;
    bool hold();  // mu_ held: waits in the core's hold queue; false when it cannot
    void no_backend(bool saturated);  // mu_ held
    double held_since_ = -1;
    bool hold_expired_ = false;

    const std::shared_ptr<Core> core_;
    const CallInput in_;
    const std::shared_ptr<http::Responder> resp_;
    std::mutex mu_;
    int attempt_ = 0;
    std::vector<const Backend*> tried_;
    std::shared_ptr<Backend> backend_;
    std::shared_ptr<http::PendingCall> pending_;
    int retries_ = 0, resumes_ = 0, segment_ = 0;
    int status_ = 0;
    std::string body_;  // non-stream or non-200 answer of the current attempt
    SseSplitter sse_;
    bool bad_stream_ = false;  // garbage or an error event from the current backend
    std::string bad_reason_;
    bool closed_ = false;    // answered or the client left
    bool started_ = false;   // the client's stream has begun
    bool finished_ = false;  // a finish_reason came
    std::string id_, model_, finish_reason_;
    json created_;
    std::vector<int32_t> prompt_ids_, gen_ids_;
    std::string gen_text_;
    int64_t gen_chunks_ = 0;       // token chunks (text mode: one token each)
    int64_t base_completion_ = 0;  // tokens generated before the current segment
    int64_t seg_completion_ = -1, seg_prompt_ = -1, first_prompt_ = -1;
    double t_start_ = 0, t_first_ = -1, t_last_ = -1;
};

void ProxyCall::start() {
    std::weak_ptr<ProxyCall> weak = weak_from_this();
    resp_->on_disconnect([weak] {
        auto self = weak.lock();
        if (!self) return;
        std::lock_guard lock(self->mu_);
        self->closed_ = true;
        if (self->pending_) self->pending_->cancel();
    });
    std::lock_guard lock(mu_);
    attempt();
}

int64_t ProxyCall::generated() const {
    return !gen_ids_.empty() ? int64_t(gen_ids_.size()) : gen_chunks_;
}

bool ProxyCall::resumable() const {
    if (!in_.stream || in_.n != 1 || finished_) return false;
    if (!prompt_ids_.empty()) return true;  // token ids (a Pagoda backend)
    if (in_.chat) return true;              // continue_final_message
    return in_.body.contains("prompt") && in_.body["prompt"].is_string();
}

ClientBody ProxyCall::next_body() {
    ClientBody out;
    out.path = in_.path;
    if (!in_.generation) {
        out.body = in_.raw_body;
        return out;
    }
    json b = in_.body;
    const bool pagoda = backend_->health().pagoda;
    if (segment_ == 0 || generated() == 0) {
        if (in_.stream) {
            b["stream_options"] = {{"include_usage", true}};
            if (pagoda) b["return_token_ids"] = true;
        }
        out.body = segment_ == 0 && !in_.stream ? in_.raw_body : b.dump();
        return out;
    }
    const int64_t gen = generated();
    if (!prompt_ids_.empty()) {
        for (const char* k : kIdResumeDropped) b.erase(k);
        b["resume_token_ids"] = gen_ids_;
        b["return_token_ids"] = true;
    } else if (in_.chat) {
        for (const char* k : kTextResumeDropped) b.erase(k);
        b["messages"].push_back({{"role", "assistant"}, {"content", gen_text_}});
        b["continue_final_message"] = true;
        b["add_generation_prompt"] = false;
    } else {
        for (const char* k : kTextResumeDropped) b.erase(k);
        b["prompt"] = b["prompt"].get<std::string>() + gen_text_;
    }
    b["stream"] = true;
    b["stream_options"] = {{"include_usage", true}};
    if (in_.max_tokens >= 0) {
        b.erase("max_completion_tokens");
        b["max_tokens"] = std::max<int64_t>(1, in_.max_tokens - gen);
    }
    if (b.contains("min_tokens") && b["min_tokens"].is_number_integer()) {
        b["min_tokens"] = std::max<int64_t>(0, b["min_tokens"].get<int64_t>() - gen);
    }
    out.body = b.dump();
    return out;
}

// No backend to try: resume fails, 429 when every pool is saturated, the last backend's own
// answer, the hold queue (a pool waking from zero), else 503.
void ProxyCall::no_backend(bool saturated) {
    if (started_) return fail_stream("no backend left to resume the stream on");
    if (saturated && tried_.empty()) {
        core_->metrics.shed();
        return reply_now(
            429, error_body(429, "every pool is saturated; retry later", "rate_limit_error"), true);
    }
    if (status_ != 0 && !body_.empty()) {
        http::Response r;  // the last backend's own answer
        r.status = status_;
        r.body = body_;
        closed_ = true;
        resp_->send(std::move(r));
        return;
    }
    if (tried_.empty()) core_->last_unserved_s = core_->now_s();
    if (tried_.empty() && core_->cfg.hold_timeout_s > 0 && hold()) return;
    core_->metrics.failed("no_backend");
    if (held_since_ >= 0) {  // held to the deadline: a pool did not wake in time
        return reply_now(503,
                         error_body(503,
                                    fmt::format("no backend became ready within the hold time ({} "
                                                "s); retry later",
                                                core_->cfg.hold_timeout_s),
                                    "server_error"),
                         true);
    }
    return reply_now(503, error_body(503,
                                     tried_.empty() ? "no healthy backend in any pool"
                                                    : "every backend tried failed",
                                     "server_error"));
}

void ProxyCall::attempt() {
    if (closed_) return;
    Core::Picked p = core_->pick(in_.key, tried_);
    if (!p.backend) return no_backend(p.saturated);
    backend_ = p.backend;
    tried_.push_back(backend_.get());
    const int a = ++attempt_;
    status_ = 0;
    body_.clear();
    sse_ = SseSplitter{};
    bad_stream_ = false;
    seg_completion_ = seg_prompt_ = -1;
    ClientBody cb = next_body();
    http::ClientRequest req;
    req.method = in_.method;
    req.path = cb.path;
    req.body = std::move(cb.body);
    if (!in_.content_type.empty()) req.content_type = in_.content_type;
    req.headers.emplace_back("X-Request-Id", in_.request_id);
    http::ClientCallbacks c;
    std::weak_ptr<ProxyCall> weak = weak_from_this();
    c.on_status = [weak, a](int s) {
        if (auto self = weak.lock()) self->on_status(a, s);
    };
    c.on_body = [weak, a](std::string_view d) {
        if (auto self = weak.lock()) self->on_body(a, d);
    };
    c.on_done = [weak, a, self_hold = shared_from_this()](const http::ClientError* e) {
        self_hold->on_done(a, e);
    };
    backend_->outstanding.fetch_add(1, std::memory_order_relaxed);
    pending_ = backend_->client().start(std::move(req), std::move(c));
}

void ProxyCall::on_status(int a, int status) {
    std::lock_guard lock(mu_);
    if (a != attempt_) return;
    status_ = status;
}

void ProxyCall::on_body(int a, std::string_view data) {
    std::lock_guard lock(mu_);
    if (a != attempt_ || closed_ || bad_stream_) return;
    if (status_ != 200 || !in_.stream) {
        if (body_.size() < (64u << 20)) body_.append(data);
        return;
    }
    sse_.feed(data);
    while (auto ev = sse_.next()) {
        on_event(*ev);
        if (bad_stream_ || closed_) break;
    }
    if (bad_stream_ && pending_) pending_->cancel();
}

void ProxyCall::on_done(int a, const http::ClientError* err) {
    std::lock_guard lock(mu_);
    if (a != attempt_) return;
    backend_->outstanding.fetch_sub(1, std::memory_order_relaxed);
    pending_.reset();
    if (closed_) return;
    std::string why;
    if (bad_stream_) {
        why = bad_reason_;
    } else if (err != nullptr) {
        why = err->message;
    } else if (status_ >= 500 || status_ == 429) {
        why = fmt::format("HTTP {}", status_);
    } else if (in_.stream && status_ == 200 && !finished_) {
        why = "the stream ended without a finish_reason";
    }
    if (!why.empty()) return upstream_failed(why);
    backend_->on_success();
    if (in_.stream && status_ == 200) return finish_stream();
    http::Response r;
    r.status = status_;
    r.body = std::move(body_);
    r.headers.emplace_back("X-Request-Id", in_.request_id);
    core_->metrics.request(backend_->pool(), backend_->url(), status_);
    if (core_->cfg.access_log) {  // tokens and finish reason from the backend's answer
        const json b = in_.generation ? json::parse(r.body, nullptr, false) : json();
        if (b.is_object() && b.contains("choices") && b["choices"].is_array() &&
            !b["choices"].empty() && b["choices"][0].value("finish_reason", json()).is_string()) {
            finish_reason_ = b["choices"][0]["finish_reason"].get<std::string>();
        }
        const json u = b.is_object() ? b.value("usage", json::object()) : json::object();
        access(status_, u.is_object() ? u.value("prompt_tokens", int64_t(-1)) : -1,
               u.is_object() ? u.value("completion_tokens", int64_t(-1)) : -1);
    }
    if (in_.generation) {
        core_->metrics.e2e(backend_->pool(), backend_->url(), core_->now_s() - t_start_);
        core_->record_arm(backend_->pool(),
                          {core_->now_s(), -1, core_->now_s() - t_start_, false, status_ < 400});
    }
    closed_ = true;
    resp_->send(std::move(r));
}

void ProxyCall::upstream_failed(const std::string& why) {
    const bool overloaded = status_ == 429;
    // The replica that failed is charged with it, whichever one finishes the request.
    core_->metrics.upstream_failure(backend_->pool(), backend_->url(),
                                    overloaded       ? "overloaded"
                                    : bad_stream_    ? "bad_stream"
                                    : status_ >= 500 ? "http_5xx"
                                    : status_ == 0   ? "connection"
                                                     : "incomplete_stream");
    if (!overloaded && backend_->on_failure(core_->now_s(), core_->cfg)) {
        core_->audit("router_ejection",
                     {{"pool", backend_->pool()}, {"backend", backend_->url()}, {"reason", why}});
        log_warn("router_ejection backend={} reason=\"{}\"", backend_->url(), why);
    }
    if (!started_) {
        if (retries_ >= core_->cfg.max_retries) {
            core_->metrics.failed("retries_exhausted");
            if (status_ != 0 && !body_.empty()) {
                http::Response r;
                r.status = status_;
                r.body = body_;
                closed_ = true;
                resp_->send(std::move(r));
                return;
            }
            return reply_now(502, error_body(502, "the backend failed: " + why, "server_error"));
        }
        ++retries_;
        core_->metrics.retry(backend_->pool(), backend_->url());
        return attempt();
    }
    if (!resumable() || resumes_ >= core_->cfg.max_resumes) {
        core_->metrics.failed("stream_broken");
        return fail_stream("the backend failed mid-stream: " + why);
    }
    ++resumes_;
    core_->metrics.resumption(backend_->pool(), backend_->url());
    log_info("router_resume from={} generated={} reason=\"{}\"", backend_->url(), generated(), why);
    base_completion_ = generated();
    ++segment_;
    attempt();
}

// One SSE event of the current backend's stream.
void ProxyCall::on_event(const std::string& data) {
    if (data == "[DONE]") return;  // the router writes its own
    json j = json::parse(data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        bad_stream_ = true;
        bad_reason_ = "the backend sent an event that is not JSON";
        return;
    }
    if (j.contains("error")) {
        bad_stream_ = true;
        bad_reason_ = "the backend reported an error mid-stream: " + j["error"].dump();
        return;
    }
    if (const auto u = j.find("usage"); u != j.end() && u->is_object()) {
        seg_completion_ = u->value("completion_tokens", int64_t(-1));
        seg_prompt_ = u->value("prompt_tokens", int64_t(-1));
        if (segment_ == 0) first_prompt_ = seg_prompt_;
    }
    auto choices = j.find("choices");
    if (choices == j.end() || !choices->is_array() || choices->empty()) return;
    if (segment_ == 0 && id_.empty()) {
        id_ = j.value("id", "");
        model_ = j.value("model", "");
        created_ = j.value("created", json(0));
    }
    for (auto& choice : *choices) forward(choice, j, data);
}

// Records one choice's tokens and writes it to the client in the client's shape.
void ProxyCall::forward(json& choice, const json& chunk, const std::string& raw) {
    bool rewrite = segment_ > 0;
    size_t new_tokens = 0;
    if (auto p = choice.find("prompt_token_ids"); p != choice.end()) {
        if (segment_ == 0 && p->is_array()) prompt_ids_ = p->get<std::vector<int32_t>>();
        rewrite = rewrite || !in_.client_token_ids;
    }
    json ids = json::array();
    if (auto t = choice.find("token_ids"); t != choice.end() && t->is_array()) {
        ids = *t;
        new_tokens = t->size();
        for (const auto& id : *t) gen_ids_.push_back(id.get<int32_t>());
        rewrite = rewrite || !in_.client_token_ids;
    }
    std::string text;
    const json* src = choice.contains("delta") ? &choice["delta"] : &choice;
    if (auto c = src->find(choice.contains("delta") ? "content" : "text");
        c != src->end() && c->is_string()) {
        text = c->get<std::string>();
    }
    if (ids.empty() && !text.empty()) {
        ++gen_chunks_;
        new_tokens = 1;
    }
    gen_text_ += text;
    const json finish = choice.value("finish_reason", json(nullptr));
    if (!finish.is_null()) finished_ = true;
    if (finish.is_string()) finish_reason_ = finish.get<std::string>();
    if (!rewrite) return write_client("data: " + raw + "\n\n");
    json out = {{"id", id_}, {"created", created_}, {"model", model_}};
    json c = {
        {"index", choice.value("index", 0)}, {"logprobs", nullptr}, {"finish_reason", finish}};
    bool calls = false;  // tool_calls deltas (a resumed chat stream keeps them)
    if (in_.chat) {
        out["object"] = "chat.completion.chunk";
        json delta = choice.contains("delta") && choice["delta"].is_object() ? choice["delta"]
                                                                             : json::object();
        if (segment_ > 0) delta.erase("role");  // the client had it from the first segment
        calls = delta.contains("tool_calls");
        if (!text.empty() || (finish.is_null() && !calls)) delta["content"] = text;
        c["delta"] = delta;
        c["logprobs"] = choice.value("logprobs", json(nullptr));
    } else {
        out["object"] = "text_completion";
        c["text"] = text;
        if (choice.contains("stop_reason")) c["stop_reason"] = choice["stop_reason"];
    }
    if (in_.client_token_ids) c["token_ids"] = ids;
    out["choices"] = json::array({c});
    (void)chunk;
    if (new_tokens > 0 || !finish.is_null() || segment_ == 0 || calls) {
        write_client("data: " + out.dump() + "\n\n");
    }
}

void ProxyCall::write_client(const std::string& data) {
    const double now = core_->now_s();
    if (!started_) {
        started_ = true;
        resp_->start_stream(200, "text/event-stream", {{"X-Request-Id", in_.request_id}});
    }
    if (t_first_ < 0) {
        t_first_ = now;
        core_->metrics.ttft(backend_->pool(), backend_->url(), now - t_start_);
    } else {
        core_->metrics.itl(backend_->pool(), now - t_last_);
    }
    t_last_ = now;
    resp_->write(data);
}

void ProxyCall::finish_stream() {
    if (!started_) write_client("");  // a stream that produced no chunk at all
    if (in_.client_usage) {
        const int64_t prompt = first_prompt_ >= 0     ? first_prompt_
                               : !prompt_ids_.empty() ? int64_t(prompt_ids_.size())
                               : seg_prompt_ >= 0     ? seg_prompt_ - base_completion_
                                                      : 0;
        const int64_t completion =
            base_completion_ +
            (seg_completion_ >= 0 ? seg_completion_ : generated() - base_completion_);
        json u = {{"id", id_},
                  {"object", in_.chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", created_},
                  {"model", model_},
                  {"choices", json::array()},
                  {"usage",
                   {{"prompt_tokens", prompt},
                    {"completion_tokens", completion},
                    {"total_tokens", prompt + completion}}}};
        resp_->write("data: " + u.dump() + "\n\n");
    }
    resp_->write("data: [DONE]\n\n");
    resp_->finish();
    done(200);
}

void ProxyCall::fail_stream(const std::string& msg) {
    resp_->write("data: " + error_body(502, msg, "server_error").dump() + "\n\n");
    resp_->write("data: [DONE]\n\n");
    resp_->finish();
    done(502);
}

// No backend is ready anywhere: wait for one (a pool waking from zero) until the hold
// deadline. The retry runs on the router's health thread.
bool ProxyCall::hold() {
    if (hold_expired_ || closed_) return false;
    const double now = core_->now_s();
    if (held_since_ < 0) held_since_ = now;
    const double deadline = held_since_ + core_->cfg.hold_timeout_s;
    if (now >= deadline) return false;
    auto self = shared_from_this();
    return core_->hold(
        [self](bool expired) {
            std::lock_guard lock(self->mu_);
            if (self->closed_) return;
            self->hold_expired_ = expired;
            self->attempt();
        },
        deadline);
}

void ProxyCall::reply_now(int status, const json& body, bool retry_after) {
    http::Response r;
    r.status = status;
    r.body = body.dump();
    if (retry_after)
        r.headers.emplace_back("Retry-After", std::to_string(core_->cfg.retry_after_s));
    r.headers.emplace_back("X-Request-Id", in_.request_id);
    closed_ = true;
    access(status, -1, -1);
    resp_->send(std::move(r));
}

void ProxyCall::done(int code) {
    closed_ = true;
    const double now = core_->now_s();
    core_->metrics.request(backend_->pool(), backend_->url(), code);
    core_->metrics.e2e(backend_->pool(), backend_->url(), now - t_start_);
    const int64_t prompt = first_prompt_ >= 0 ? first_prompt_ : int64_t(prompt_ids_.size());
    core_->record_arm(backend_->pool(),
                      {now, t_first_ >= 0 ? t_first_ - t_start_ : -1, now - t_start_,
                       prompt >= core_->cfg.long_prompt_tokens, code == 200});
    access(code, prompt,
           base_completion_ +
               (seg_completion_ >= 0 ? seg_completion_ : generated() - base_completion_));
}

// One `access` line: the request id the backend logged too, and which replica served it.
void ProxyCall::access(int status, int64_t prompt_tokens, int64_t completion_tokens) {
    if (!core_->cfg.access_log) return;
    const auto n = [](int64_t v) { return v >= 0 ? std::to_string(v) : std::string("-"); };
    const double now = core_->now_s();
    log_info(
        "access id={} route={} status={} prompt_tokens={} completion_tokens={} ttft_ms={} "
        "total_ms={:.1f} finish_reason={} replica={} pool={} retries={} resumes={}",
        in_.request_id, in_.path, status, n(prompt_tokens), n(completion_tokens),
        t_first_ >= 0 ? fmt::format("{:.1f}", (t_first_ - t_start_) * 1e3) : "-",
        (now - t_start_) * 1e3, finish_reason_.empty() ? "-" : finish_reason_,
        backend_ ? backend_->url() : "-", backend_ ? backend_->pool() : "-", retries_, resumes_);
}

}  // namespace

void start_proxy(std::shared_ptr<Core> core, CallInput in, std::shared_ptr<http::Responder> resp) {
    auto call = std::make_shared<ProxyCall>(std::move(core), std::move(in), std::move(resp));
    call->start();
}

}  // namespace pagoda::router
