#include "server/openai_server.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "base/log.h"
#include "server/chat_template.h"
#include "server/request.h"
#include "tokenizer/detokenizer.h"

namespace pagoda::server {

using json = nlohmann::json;
using engine::Clock;

namespace {

http::Response json_response(int status, const json& j) {
    http::Response r;
    r.status = status;
    r.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
    return r;
}

// OpenAI's error shape; `code` carries the HTTP status as vLLM does.
http::Response error(int status, const std::string& message, const std::string& type,
                     const std::string& param = "") {
    json e = {{"message", message},
              {"type", type},
              {"param", param.empty() ? json(nullptr) : json(param)},
              {"code", status}};
    return json_response(status, json{{"error", e}});
}

http::Reply reply(http::Response r) { return http::Reply{std::move(r), {}}; }

std::string random_id(const char* prefix) {
    static thread_local std::mt19937_64 rng(std::random_device{}());
    return fmt::format("{}{:016x}{:08x}", prefix, rng(), uint32_t(rng()));
}

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

const char* finish_name(engine::FinishReason r) {
    switch (r) {
        case engine::FinishReason::kStop: return "stop";
        case engine::FinishReason::kLength: return "length";
        case engine::FinishReason::kCancelled: return "abort";
        case engine::FinishReason::kRejected: return "abort";
        case engine::FinishReason::kTimeout: return "abort";
        case engine::FinishReason::kError: return "error";
    }
    return "error";
}

struct ProcessStats {
    int64_t rss_bytes = 0, threads = 0;
    double cpu_seconds = 0;
};

// From /proc/self/stat (utime, stime, num_threads) and /proc/self/statm (resident pages).
ProcessStats read_process_stats() {
    ProcessStats ps;
    const long page = sysconf(_SC_PAGESIZE), tick = sysconf(_SC_CLK_TCK);
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
        long size = 0, resident = 0;
        if (std::fscanf(f, "%ld %ld", &size, &resident) == 2)
            ps.rss_bytes = int64_t(resident) * page;
        std::fclose(f);
    }
    if (FILE* f = std::fopen("/proc/self/stat", "r")) {
        char buf[2048];
        const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
        std::fclose(f);
        buf[n] = 0;
        // Fields after the command name (which may hold spaces) start after the last ')'.
        const char* p = std::strrchr(buf, ')');
        if (p != nullptr) {
            unsigned long utime = 0, stime = 0;
            long threads = 0;
            // state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
            // cutime cstime priority nice num_threads
            if (std::sscanf(
                    p + 2,
                    "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %ld",
                    &utime, &stime, &threads) == 3) {
                ps.cpu_seconds = double(utime + stime) / double(tick);
                ps.threads = threads;
            }
        }
    }
    return ps;
}

std::vector<double> latency_buckets() {
    return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
            0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
}
std::vector<double> token_buckets() {
    return {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000};
}

std::optional<json> parse_body(const http::Request& req, http::Response& err);

}  // namespace

json knobs_json(const engine::RuntimeKnobs& k);

// One generation request (all its prompts and samples) while it runs. Lives in the
// callbacks; everything but the constructor runs on the HTTP I/O thread.
struct OpenAiServer::Call : std::enable_shared_from_this<OpenAiServer::Call> {
    OpenAiServer* srv = nullptr;
    std::shared_ptr<http::Responder> resp;
    bool chat = false, stream = false, include_usage = false, chat_logprobs = false;
    bool warmup = false;  // in-process warmup traffic: not counted in metrics
    int n = 1, logprobs = -1;
    std::string id, model;
    int64_t created = 0;
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    std::vector<bool> stream_done;
    std::vector<std::string> text, finish, stop_reason;
    std::vector<json>
        lps;  // per choice: completions {tokens, token_logprobs, ...} or chat content list
    std::vector<bool> role_sent;
    std::vector<Clock::time_point> last_time;
    std::vector<std::vector<double>> itl;  // per stream (request)
    engine::Usage usage;
    std::string error_message;
    engine::FinishReason error_reason = engine::FinishReason::kStop;
    bool complete = false;

    std::string piece(int32_t id) const {
        return tokenizer::sanitize_utf8(
            srv->engine_.model().tokenizer().token_bytes(id, tokenizer::SkipSpecial::kNo));
    }

    void add_logprobs(size_t c, const engine::Event& ev, json* delta_lp) {
        for (const auto& lp : ev.logprobs) {
            if (chat) {
                json top = json::array();
                for (const auto& [tid, l] : lp.top) {
                    const std::string t = piece(tid);
                    top.push_back({{"token", t},
                                   {"logprob", l},
                                   {"bytes", std::vector<uint8_t>(t.begin(), t.end())}});
                }
                const std::string t = piece(lp.token);
                json item = {{"token", t},
                             {"logprob", lp.logprob},
                             {"bytes", std::vector<uint8_t>(t.begin(), t.end())},
                             {"top_logprobs", top}};
                lps[c]["content"].push_back(item);
                if (delta_lp) (*delta_lp)["content"].push_back(item);
            } else {
                json top = json::object();
                for (const auto& [tid, l] : lp.top) top[piece(tid)] = l;
                const std::string t = piece(lp.token);
                auto add = [&](json& o) {
                    o["tokens"].push_back(t);
                    o["token_logprobs"].push_back(lp.logprob);
                    o["top_logprobs"].push_back(top);
                    o["text_offset"].push_back(0);
                };
                add(lps[c]);
                if (delta_lp) add(*delta_lp);
            }
        }
    }

    void send_chunk(const json& j) {
        resp->write("data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n");
    }

    json chunk_head() const {
        return {{"id", id},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", model}};
    }

    void pump() {
        if (complete) return;
        const auto t0 = Clock::now();
        struct Observe {
            metrics::Histogram& h;
            Clock::time_point t0;
            ~Observe() { h.observe(std::chrono::duration<double>(Clock::now() - t0).count()); }
        } observe{srv->output_, t0};
        for (size_t s = 0; s < streams.size(); ++s) {
            while (auto ev = streams[s]->try_next()) on_event(s, *ev);
        }
        bool all = true;
        for (bool d : stream_done) all = all && d;
        if (all) finish_call();
    }

    void on_event(size_t s, const engine::Event& ev) {
        const size_t c = s * size_t(n) + size_t(ev.index);
        if (!ev.token_ids.empty()) {
            if (last_time[c] != Clock::time_point{})
                itl[s].push_back(std::chrono::duration<double>(ev.time - last_time[c]).count());
            last_time[c] = ev.time;
        }
        text[c] += ev.text;
        json delta_lp;
        const bool want_lp = (chat && chat_logprobs) || (!chat && logprobs >= 0);
        if (want_lp && !ev.logprobs.empty()) add_logprobs(c, ev, stream ? &delta_lp : nullptr);
        if (ev.finish) {
            finish[c] = finish_name(*ev.finish);
            stop_reason[c] = ev.stop_reason;
            if (*ev.finish == engine::FinishReason::kRejected ||
                *ev.finish == engine::FinishReason::kError ||
                *ev.finish == engine::FinishReason::kTimeout) {
                error_reason = *ev.finish;
                if (!ev.error.empty()) error_message = ev.error;
            }
        }
        if (stream && (!ev.text.empty() || ev.finish || !delta_lp.is_null())) {
            json j = chunk_head();
            json choice = {{"index", c},
                           {"logprobs", delta_lp.is_null() ? json(nullptr) : delta_lp},
                           {"finish_reason", ev.finish ? json(finish[c]) : json(nullptr)}};
            if (chat) {
                json delta = json::object();
                if (!role_sent[c]) {
                    delta["role"] = "assistant";
                    role_sent[c] = true;
                }
                if (!ev.text.empty() || !ev.finish) delta["content"] = ev.text;
                choice["delta"] = delta;
            } else {
                choice["text"] = ev.text;
                if (ev.finish && !stop_reason[c].empty()) choice["stop_reason"] = stop_reason[c];
            }
            j["choices"] = json::array({choice});
            send_chunk(j);
        }
        if (ev.request_done) {
            stream_done[s] = true;
            usage.prompt_tokens += ev.usage.prompt_tokens;
            usage.completion_tokens += ev.usage.completion_tokens;
            usage.cached_tokens += ev.usage.cached_tokens;
            const bool failed = ev.finish && (*ev.finish == engine::FinishReason::kError);
            if (!warmup) srv->record_finished(ev, itl[s], failed);
        }
    }

    json usage_json() const {
        json u = {{"prompt_tokens", usage.prompt_tokens},
                  {"completion_tokens", usage.completion_tokens},
                  {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
        if (usage.cached_tokens > 0)
            u["prompt_tokens_details"] = {{"cached_tokens", usage.cached_tokens}};
        return u;
    }

    void finish_call() {
        complete = true;
        for (auto& s : streams) s->set_notify({});  // releases the notifiers' hold on this call
        --srv->in_flight_;
        const bool failed =
            error_reason != engine::FinishReason::kStop && usage.completion_tokens == 0;
        if ((stream || !failed) && !warmup) ++srv->http_by_status_[2];
        if (stream) {
            if (failed) {
                send_chunk(json{
                    {"error",
                     {{"message", error_message.empty() ? "the request failed" : error_message},
                      {"type", "server_error"},
                      {"param", nullptr},
                      {"code", 500}}}});
            } else if (include_usage) {
                json j = chunk_head();
                j["choices"] = json::array();
                j["usage"] = usage_json();
                send_chunk(j);
            }
            resp->write("data: [DONE]\n\n");
            resp->finish();
            return;
        }
        if (failed) {
            const int status = error_reason == engine::FinishReason::kRejected ? 429 : 500;
            ++srv->http_by_status_[status / 100];
            resp->send(error(status, error_message.empty() ? "the request failed" : error_message,
                             status == 429 ? "rate_limit_error" : "server_error"));
            return;
        }
        json choices = json::array();
        for (size_t c = 0; c < text.size(); ++c) {
            json lp = (chat ? chat_logprobs : logprobs >= 0) ? lps[c] : json(nullptr);
            json choice = {{"index", c}, {"logprobs", lp}, {"finish_reason", finish[c]}};
            if (chat) {
                choice["message"] = {{"role", "assistant"}, {"content", text[c]}};
            } else {
                choice["text"] = text[c];
                choice["stop_reason"] =
                    stop_reason[c].empty() ? json(nullptr) : json(stop_reason[c]);
            }
            choices.push_back(choice);
        }
        json body = {{"id", id},           {"object", chat ? "chat.completion" : "text_completion"},
                     {"created", created}, {"model", model},
                     {"choices", choices}, {"usage", usage_json()}};
        resp->send(json_response(200, body));
    }

    void cancel_all() {
        for (auto& s : streams) s->cancel();
    }
};

OpenAiServer::OpenAiServer(engine::Engine& engine, ServerConfig cfg)
    : engine_(engine),
      cfg_(std::move(cfg)),
      created_(unix_now()),
      ttft_(latency_buckets()),
      itl_(latency_buckets()),
      e2e_(latency_buckets()),
      queue_(latency_buckets()),
      prefill_(latency_buckets()),
      decode_(latency_buckets()),
      prompt_tokens_(token_buckets()),
      gen_tokens_(token_buckets()),
      output_({1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01}) {}

OpenAiServer::~OpenAiServer() = default;

bool OpenAiServer::authorized(const http::Request& req) const {
    if (cfg_.api_keys.empty()) return true;
    const std::string_view h = req.header("authorization");
    if (h.substr(0, 7) != "Bearer ") return false;
    const std::string_view key = h.substr(7);
    for (const auto& k : cfg_.api_keys) {
        if (key == k) return true;
    }
    return false;
}

http::Reply OpenAiServer::handle(const http::Request& req, bool warmup) {
    http::Reply r = [&]() -> http::Reply {
        const std::string& p = req.path;
        if (p == "/health") {
            const auto age = Clock::now() - engine_.last_heartbeat();
            if (age > cfg_.stall_timeout)
                return reply(error(503, "the engine loop is stalled", "server_error"));
            return reply(json_response(200, json::object()));
        }
        if (p == "/ready") {
            if (draining_)
                return reply(error(503, "draining: not accepting new requests", "server_error"));
            if (!ready_) return reply(error(503, "warming up", "server_error"));
            return reply(json_response(200, json{{"status", "ready"}}));
        }
        if (p == "/metrics" && req.method == "GET") {
            http::Response m;
            m.content_type = "text/plain; version=0.0.4; charset=utf-8";
            m.body = metrics_text();
            return reply(std::move(m));
        }
        const bool api = p.rfind("/v1/", 0) == 0 || p == "/tokenize" || p == "/detokenize" ||
                         p.rfind("/admin/", 0) == 0;
        if (api && !authorized(req)) {
            return reply(error(401, "missing or wrong API key: send 'Authorization: Bearer <key>'",
                               "authentication_error"));
        }
        if (p == "/v1/models" && req.method == "GET") return models();
        if (p == "/v1/completions" && req.method == "POST") return completions(req, false, warmup);
        if (p == "/v1/chat/completions" && req.method == "POST")
            return completions(req, true, warmup);
        if (p == "/tokenize" && req.method == "POST") return tokenize(req);
        if (p == "/detokenize" && req.method == "POST") return detokenize(req);
        if (p == "/admin/drain" && req.method == "POST") {
            start_drain();
            log_info("drain_requested via=http remote={} in_flight={}", req.remote, in_flight());
            return reply(
                json_response(200, json{{"status", "draining"}, {"in_flight", in_flight()}}));
        }
        if (p == "/admin/knobs" && req.method == "GET")
            return reply(json_response(200, knobs_json(engine_.knobs())));
        if (p == "/admin/knobs" && req.method == "PUT") return put_knobs(req);
        return reply(
            error(404, fmt::format("no route for {} {}", req.method, p), "not_found_error"));
    }();
    if (!r.deferred) ++http_by_status_[std::clamp(r.now.status / 100, 1, 5)];
    return r;
}

json knobs_json(const engine::RuntimeKnobs& k) {
    return {{"max_num_seqs", k.max_num_seqs},
            {"max_num_batched_tokens", k.max_num_batched_tokens},
            {"long_prefill_token_threshold", k.long_prefill_token_threshold},
            {"max_waiting_requests", k.max_waiting_requests},
            {"max_waiting_tokens", k.max_waiting_tokens}};
}

http::Reply OpenAiServer::put_knobs(const http::Request& req) {
    http::Response err;
    auto j = parse_body(req, err);
    if (!j) return reply(err);
    engine::RuntimeKnobs k = engine_.knobs();
    for (const auto& [key, v] : j->items()) {
        int64_t* target64 = key == "max_waiting_tokens" ? &k.max_waiting_tokens : nullptr;
        int* target = key == "max_num_seqs"                   ? &k.max_num_seqs
                      : key == "max_num_batched_tokens"       ? &k.max_num_batched_tokens
                      : key == "long_prefill_token_threshold" ? &k.long_prefill_token_threshold
                      : key == "max_waiting_requests"         ? &k.max_waiting_requests
                                                              : nullptr;
        if (target == nullptr && target64 == nullptr) {
            return reply(
                error(400,
                      fmt::format(
                          "unknown knob '{}' (known: max_num_seqs, max_num_batched_tokens, "
                          "long_prefill_token_threshold, max_waiting_requests, max_waiting_tokens)",
                          key),
                      "invalid_request_error", key));
        }
        if (!v.is_number_integer()) {
            return reply(error(400,
                               fmt::format("'{}' must be an integer, got {}", key, v.type_name()),
                               "invalid_request_error", key));
        }
        const int64_t x = v.get<int64_t>();
        if (target64 != nullptr) {
            *target64 = x;
        } else {
            *target = int(std::clamp<int64_t>(x, INT32_MIN, INT32_MAX));
        }
    }
    if (Status st = engine_.set_knobs(k); !st.ok())
        return reply(error(400, st.error().message, "invalid_request_error"));
    return reply(json_response(200, knobs_json(k)));
}

http::Reply OpenAiServer::models() const {
    json m = {{"id", cfg_.served_model_name},
              {"object", "model"},
              {"created", created_},
              {"owned_by", "pagoda"},
              {"root", cfg_.served_model_name},
              {"max_model_len", engine_.config().sched.max_model_len}};
    return reply(json_response(200, json{{"object", "list"}, {"data", json::array({m})}}));
}

namespace {

// Parses the body; on failure fills `err`.
std::optional<json> parse_body(const http::Request& req, http::Response& err) {
    try {
        json j = json::parse(req.body);
        if (!j.is_object()) {
            err = error(400, "the request body must be a JSON object", "invalid_request_error");
            return std::nullopt;
        }
        return j;
    } catch (const json::parse_error& e) {
        err = error(400, fmt::format("the request body is not valid JSON: {}", e.what()),
                    "invalid_request_error");
        return std::nullopt;
    }
}

}  // namespace

http::Reply OpenAiServer::tokenize(const http::Request& req) {
    http::Response err;
    auto j = parse_body(req, err);
    if (!j) return reply(err);
    const auto& tok = engine_.model().tokenizer();
    bool add_special = true;
    if (auto e = read(*j, "add_special_tokens", add_special, "a boolean"))
        return reply(error(400, e->message, "invalid_request_error", e->param));
    std::string text;
    if (j->contains("messages")) {
        auto rendered = render_chat((*j)["messages"], tok.vocab(), true);
        if (!rendered.ok())
            return reply(error(400, rendered.error().message, "invalid_request_error", "messages"));
        text = rendered->text;
        add_special = rendered->add_bos;
    } else if (auto e = read(*j, "prompt", text, "a string")) {
        return reply(error(400, e->message, "invalid_request_error", e->param));
    } else if (!j->contains("prompt")) {
        return reply(error(400, "'prompt' (a string) or 'messages' is required",
                           "invalid_request_error", "prompt"));
    }
    const auto ids =
        tok.encode(text, {add_special ? tokenizer::AddSpecial::kYes : tokenizer::AddSpecial::kNo,
                          tokenizer::ParseSpecial::kYes});
    return reply(json_response(200, json{{"count", ids.size()},
                                         {"max_model_len", engine_.config().sched.max_model_len},
                                         {"tokens", ids}}));
}

http::Reply OpenAiServer::detokenize(const http::Request& req) {
    http::Response err;
    auto j = parse_body(req, err);
    if (!j) return reply(err);
    auto it = j->find("tokens");
    if (it == j->end() || !it->is_array())
        return reply(error(400, "'tokens' (a list of token ids) is required",
                           "invalid_request_error", "tokens"));
    std::vector<int32_t> ids;
    const int64_t vocab = engine_.model().config().vocab_size;
    for (const auto& t : *it) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab) {
            return reply(error(400, fmt::format("'tokens' must hold token ids in [0, {})", vocab),
                               "invalid_request_error", "tokens"));
        }
        ids.push_back(t.get<int32_t>());
    }
    return reply(json_response(
        200, json{{"prompt", tokenizer::sanitize_utf8(engine_.model().tokenizer().decode(ids))}}));
}

http::Reply OpenAiServer::completions(const http::Request& req, bool chat, bool warmup) {
    if (draining_)
        return reply(
            error(503, "the server is draining and accepts no new requests", "server_error"));
    if (!ready_ && !warmup)
        return reply(error(503, "the server is warming up; retry shortly", "server_error"));
    http::Response err;
    auto body = parse_body(req, err);
    if (!body) return reply(err);
    auto parsed =
        parse_generation_request(*body, chat,
                                 {cfg_.served_model_name, engine_.config().sched.max_model_len,
                                  engine_.model().config().vocab_size},
                                 engine_.model().tokenizer());
    if (auto* e = std::get_if<RequestError>(&parsed))
        return reply(error(e->status, e->message, e->type, e->param));
    ParsedRequest& pr = std::get<ParsedRequest>(parsed);
    auto& prompts = pr.prompts;
    const engine::SamplingParams& sp = pr.sampling;
    const int priority = pr.priority;
    const bool stream = pr.stream, include_usage = pr.include_usage,
               chat_logprobs = pr.chat_logprobs;
    auto bad = [](const std::string& msg, const std::string& param) {
        return reply(error(400, msg, "invalid_request_error", param));
    };

    auto call = std::make_shared<Call>();
    call->srv = this;
    call->chat = chat;
    call->warmup = warmup;
    call->stream = stream;
    call->include_usage = include_usage;
    call->chat_logprobs = chat_logprobs;
    call->n = sp.n;
    call->logprobs = sp.logprobs;
    call->id = random_id(chat ? "chatcmpl-" : "cmpl-");
    call->model = cfg_.served_model_name;
    call->created = unix_now();
    const size_t choices = prompts.size() * size_t(sp.n);
    call->text.resize(choices);
    call->finish.resize(choices);
    call->stop_reason.resize(choices);
    call->lps.assign(choices, chat ? json{{"content", json::array()}}
                                   : json{{"tokens", json::array()},
                                          {"token_logprobs", json::array()},
                                          {"top_logprobs", json::array()},
                                          {"text_offset", json::array()}});
    call->role_sent.assign(choices, false);
    call->last_time.assign(choices, Clock::time_point{});
    call->itl.resize(prompts.size());
    call->stream_done.assign(prompts.size(), false);
    for (auto& p : prompts) {
        engine::Request r;
        r.prompt_ids = std::move(p);
        r.sampling = sp;
        r.priority = priority;
        auto s = engine_.submit(std::move(r));
        if (!s.ok()) {
            call->cancel_all();
            if (s.error().code == ErrorCode::kResourceExhausted) {
                http::Response resp = error(429, s.error().message, "rate_limit_error");
                resp.headers.emplace_back(
                    "Retry-After", std::to_string(int(std::ceil(engine_.retry_after_seconds()))));
                return reply(resp);
            }
            return bad(s.error().message, "");
        }
        call->streams.push_back(*s);
    }
    ++in_flight_;
    return http::Reply::later([call](std::shared_ptr<http::Responder> resp) {
        call->resp = resp;
        if (call->stream) resp->start_stream(200, "text/event-stream");
        std::weak_ptr<Call> weak = call;
        resp->on_disconnect([weak] {
            if (auto c = weak.lock()) c->cancel_all();
        });
        // The notifiers own the call until it completes (finish_call clears them).
        for (auto& s : call->streams) {
            s->set_notify([call, resp] { resp->post([call] { call->pump(); }); });
        }
        // Events pushed before the notifier was set.
        resp->post([call] { call->pump(); });
    });
}

void OpenAiServer::record_finished(const engine::Event& last, const std::vector<double>& itl,
                                   bool error) {
    const auto& t = last.timings;
    if (t.has_token) {
        ttft_.observe(t.ttft_seconds());
        prefill_.observe(std::chrono::duration<double>(t.first_token - t.first_scheduled).count());
        decode_.observe(std::chrono::duration<double>(t.finished - t.first_token).count());
    }
    if (t.scheduled) queue_.observe(t.queue_seconds());
    e2e_.observe(t.e2e_seconds());
    for (double d : itl) itl_.observe(d);
    prompt_tokens_.observe(double(last.usage.prompt_tokens));
    gen_tokens_.observe(double(last.usage.completion_tokens));
    prompt_total_ += last.usage.prompt_tokens;
    gen_total_ += last.usage.completion_tokens;
    const int reason = last.finish ? int(*last.finish) : int(engine::FinishReason::kError);
    ++finished_[error ? int(engine::FinishReason::kError) : reason];
}

std::string OpenAiServer::metrics_text() const {
    const auto st = engine_.stats();
    metrics::TextWriter w;
    const metrics::Labels model = {{"model_name", cfg_.served_model_name}};
    auto gauge = [&](const char* name, const char* help, double v) {
        w.family(name, "gauge", help);
        w.sample(name, model, v);
    };
    auto counter = [&](const char* name, const char* help, double v) {
        w.family(name, "counter", help);
        w.sample(name, model, v);
    };
    for (const char* prefix : {"pagoda_", "vllm:"}) {
        const std::string p = prefix;
        if (p == "vllm:" && !cfg_.vllm_metrics) continue;
        gauge((p + "num_requests_running").c_str(), "Requests in the running batch.",
              double(st->queue.running));
        w.family(p + "num_requests_waiting", "gauge", "Requests waiting, by reason.");
        w.sample(p + "num_requests_waiting", model, double(st->queue.waiting));
        gauge((p + "kv_cache_usage_perc").c_str(), "Fraction of KV cache blocks in use (0-1).",
              st->blocks.usage);
        counter((p + "prompt_tokens_total").c_str(), "Prompt tokens of finished requests.",
                double(prompt_total_.load()));
        counter((p + "generation_tokens_total").c_str(), "Generated tokens of finished requests.",
                double(gen_total_.load()));
        counter((p + "num_preemptions_total").c_str(), "Preemptions (recompute).",
                double(st->preemptions));
        counter((p + "prefix_cache_queries_total").c_str(),
                "Prompt blocks looked up in the prefix cache.", double(st->blocks.prefix_queries));
        counter((p + "prefix_cache_hits_total").c_str(), "Prompt blocks found in the prefix cache.",
                double(st->blocks.prefix_hits));
        w.family(p + "request_success_total", "counter", "Finished requests by finish reason.");
        for (int r = 0; r < 6; ++r) {
            metrics::Labels l = model;
            l.emplace_back("finished_reason", engine::finish_reason_name(engine::FinishReason(r)));
            w.sample(p + "request_success_total", l, double(finished_[r].load()));
        }
        auto hist = [&](const std::string& name, const char* help, const metrics::Histogram& h) {
            w.family(name, "histogram", help);
            w.histogram(name, model, h);
        };
        hist(p + "time_to_first_token_seconds", "Time from arrival to the first token.", ttft_);
        hist(p + "inter_token_latency_seconds", "Time between consecutive tokens of a request.",
             itl_);
        hist(p + "e2e_request_latency_seconds", "Time from arrival to the last token.", e2e_);
        hist(p + "request_queue_time_seconds", "Time from arrival to first scheduled.", queue_);
        hist(p + "request_prefill_time_seconds", "Time from first scheduled to the first token.",
             prefill_);
        hist(p + "request_decode_time_seconds", "Time from the first token to the last.", decode_);
        hist(p + "request_prompt_tokens", "Prompt tokens per request.", prompt_tokens_);
        hist(p + "request_generation_tokens", "Generated tokens per request.", gen_tokens_);
    }
    // Native-only detail.
    w.family("pagoda_requests_waiting_by_reason", "gauge",
             "Waiting requests by the reason they wait.");
    for (int r = 0; r < scheduler::kNumWaitReasons; ++r) {
        metrics::Labels l = model;
        l.emplace_back("reason", scheduler::wait_reason_name(scheduler::WaitReason(r)));
        w.sample("pagoda_requests_waiting_by_reason", l, double(st->queue.by_reason[r]));
    }
    w.family("pagoda_kv_cache_blocks", "gauge", "KV cache blocks by state.");
    for (auto [state, v] : {std::pair{"used", st->blocks.used},
                            {"free", st->blocks.free},
                            {"cached", st->blocks.cached}}) {
        metrics::Labels l = model;
        l.emplace_back("state", state);
        w.sample("pagoda_kv_cache_blocks", l, double(v));
    }
    w.family("pagoda_engine_steps_total", "counter", "Engine steps run.");
    w.sample("pagoda_engine_steps_total", model, double(st->steps));
    w.family("pagoda_engine_step_seconds_total", "counter", "Time in engine steps by stage.");
    for (auto [stage, v] : {std::pair{"schedule", st->total_time.schedule_s},
                            {"forward", st->total_time.forward_s},
                            {"sample", st->total_time.sample_s},
                            {"output", st->total_time.output_s}}) {
        metrics::Labels l = model;
        l.emplace_back("stage", stage);
        w.sample("pagoda_engine_step_seconds_total", l, v);
    }
    w.family("pagoda_http_responses_total", "counter", "HTTP responses by status class.");
    for (int c = 1; c <= 5; ++c) {
        metrics::Labels l = model;
        l.emplace_back("code", fmt::format("{}xx", c));
        w.sample("pagoda_http_responses_total", l, double(http_by_status_[c].load()));
    }
    for (const char* name : {"pagoda_cache_config_info", "vllm:cache_config_info"}) {
        if (!cfg_.vllm_metrics && name[0] == 'v') continue;
        w.family(name, "gauge", "KV cache configuration.");
        w.sample(
            name,
            {{"block_size", std::to_string(st->block_size)},
             {"num_gpu_blocks", std::to_string(st->blocks.total)},
             {"enable_prefix_caching", engine_.config().enable_prefix_caching ? "True" : "False"}},
            1.0);
    }
    gauge("pagoda_ready", "1 when ready to serve, 0 while warming up or draining.",
          ready() ? 1.0 : 0.0);
    // Scheduler stages, per engine step.
    const auto& sh = engine_.step_histograms();
    for (auto [name, h] : {std::pair{"pagoda_step_schedule_seconds", &sh.schedule},
                           {"pagoda_step_forward_seconds", &sh.forward},
                           {"pagoda_step_sample_seconds", &sh.sample},
                           {"pagoda_step_output_seconds", &sh.output},
                           {"pagoda_step_seconds", &sh.step}}) {
        w.family(name, "histogram", "Engine step stage duration (see docs/metrics.md).");
        w.histogram(name, model, *h);
    }
    w.family("pagoda_http_output_seconds", "histogram",
             "I/O-thread time turning a batch of engine events into JSON or SSE chunks and "
             "queueing them.");
    w.histogram("pagoda_http_output_seconds", model, output_);
    // Resource layer.
    const ProcessStats ps = read_process_stats();
    gauge("pagoda_process_resident_memory_bytes", "Resident set size of the process.",
          double(ps.rss_bytes));
    w.family("pagoda_process_cpu_seconds_total", "counter",
             "User + system CPU time of the process.");
    w.sample("pagoda_process_cpu_seconds_total", model, ps.cpu_seconds);
    gauge("pagoda_process_threads", "Threads of the process.", double(ps.threads));
    gauge("pagoda_kv_cache_memory_bytes", "Bytes of the KV cache pool.",
          double(engine_.kv_cache_bytes()));
    w.family("pagoda_compute_busy_seconds_total", "counter",
             "Wall time the compute pool spent in forward passes (busy fraction = rate of this).");
    w.sample("pagoda_compute_busy_seconds_total", model, st->total_time.forward_s);
    if (cfg_.open_connections)
        gauge("pagoda_http_open_connections", "Open HTTP connections.",
              double(cfg_.open_connections()));
    return w.text();
}

}  // namespace pagoda::server
