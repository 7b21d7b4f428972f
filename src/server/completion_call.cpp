// The implementation of server/completion_call.h (the contract is there).
#include "server/completion_call.h"

#include <fmt/core.h>

#include <cmath>
#include <limits>
#include <random>
#include <span>

#include "base/log.h"
#include "server/api_error.h"
#include "server/request.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/unicode.h"

namespace pagoda::server {

using engine::Clock;
using engine::FinishReason;

namespace {

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// OpenAI's finish_reason for an engine finish.
const char* finish_name(FinishReason r) {
    switch (r) {
        case FinishReason::kStop: return "stop";
        case FinishReason::kLength: return "length";
        case FinishReason::kCancelled:
        case FinishReason::kRejected:
        case FinishReason::kTimeout: return "abort";
        case FinishReason::kError: return "error";
    }
    return "error";
}

bool is_failure(FinishReason r) {
    return r == FinishReason::kRejected || r == FinishReason::kError || r == FinishReason::kTimeout;
}

// One choice of the response: prompt p's sample i is choice p * n + i.
struct ChoiceState {
    std::string text;
    std::string finish;                     // OpenAI's finish_reason, once finished
    std::string stop_reason;                // the stop string or token id that ended it
    json logprobs;                          // completions {tokens, ...} or chat {content: [...]}
    bool role_sent = false;                 // chat streams: the first delta carries the role
    std::vector<int32_t> token_ids;         // return_token_ids
    std::shared_ptr<ToolCallStream> tools;  // chat with tools: content and tool_calls
    bool prompt_ids_sent = false;           // streams: the first chunk carries prompt_token_ids
    Clock::time_point last_token_time{};
};

// One prompt's engine request.
struct PromptState {
    std::shared_ptr<engine::RequestStream> stream;
    bool done = false;
    std::vector<double> itl;  // inter-token gaps of all its samples
};

class Call : public std::enable_shared_from_this<Call> {
  public:
    Call(const CallContext& ctx, Endpoint endpoint, Origin origin, const ParsedRequest& pr)
        : ctx_(ctx),
          chat_(endpoint == Endpoint::kChatCompletions),
          warmup_(origin == Origin::kWarmup),
          stream_(pr.stream),
          include_usage_(pr.include_usage),
          token_ids_(pr.return_token_ids),
          want_logprobs_(chat_ ? pr.chat_logprobs : pr.sampling.logprobs >= 0),
          n_(pr.sampling.n),
          id_(http::random_id(chat_ ? "chatcmpl-" : "cmpl-")),
          created_(unix_now()),
          chunk_prefix_(make_chunk_prefix(id_, chat_, created_, ctx.served_model_name)) {
        ChoiceState blank;
        if (want_logprobs_) {
            blank.logprobs = chat_ ? json{{"content", json::array()}}
                                   : json{{"tokens", json::array()},
                                          {"token_logprobs", json::array()},
                                          {"top_logprobs", json::array()},
                                          {"text_offset", json::array()}};
        }
        choices_.assign(pr.prompts.size() * size_t(n_), blank);
        if (chat_ && pr.tools.choice != ToolChoice::kNone) {
            for (auto& c : choices_) c.tools = std::make_shared<ToolCallStream>(pr.tools);
        }
        if (!pr.resume_ids.empty()) {  // a resumed stream: what the client already has
            const std::string before = ctx.engine.model().tokenizer().decode(pr.resume_ids);
            for (auto& c : choices_) {
                if (c.tools) (void)c.tools->push(before);
            }
        }
        if (token_ids_) prompt_ids_ = pr.prompts;
    }

    bool streaming() const { return stream_; }
    const std::string& request_id() const { return ctx_.request_id; }
    void add_prompt(std::shared_ptr<engine::RequestStream> s) {
        prompts_.push_back({.stream = std::move(s), .done = false, .itl = {}});
    }
    void cancel_all() {
        for (auto& p : prompts_) p.stream->cancel();
    }
    void attach(std::shared_ptr<http::Responder> resp) { resp_ = std::move(resp); }
    template <typename F>
    void for_each_stream(F f) {
        for (auto& p : prompts_) f(*p.stream);
    }

    // Takes every queued event; completes the response when all prompts are done.
    void pump() {
        if (complete_) return;
        const auto t0 = Clock::now();
        for (size_t p = 0; p < prompts_.size(); ++p) {
            prompts_[p].stream->take_all(taken_);
            for (const engine::Event& ev : taken_) on_event(p, ev);
        }
        const bool all = std::all_of(prompts_.begin(), prompts_.end(),
                                     [](const PromptState& p) { return p.done; });
        // The last pump's chunks go out with the stream's end, in finish(): one write.
        if (stream_ && !all) flush();
        const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
        http_output_s_ += dt;
        if (all) finish();
        ctx_.metrics.output_seconds().observe(dt);
    }

  private:
    // `data: {"id":..,"object":..,"created":..,"model":..,"choices":[{"index":`
    static std::string make_chunk_prefix(const std::string& id, bool chat, int64_t created,
                                         const std::string& model) {
        std::string s = "data: {\"id\":\"" + id;  // ids are a prefix and letters or digits
        s += chat ? "\",\"object\":\"chat.completion.chunk\",\"created\":"
                  : "\",\"object\":\"text_completion\",\"created\":";
        s += std::to_string(created) + ",\"model\":";
        s += json(model).dump(-1, ' ', false, json::error_handler_t::replace);
        return s + ",\"choices\":[" + std::string(kIndexOpen);
    }
    static constexpr std::string_view kIndexOpen = "{\"index\":";
    // The usage chunk (stream_options.include_usage): no choices, the request's usage.
    void send_usage_chunk() {
        out_.append(chunk_prefix_, 0, chunk_prefix_.size() - kIndexOpen.size());
        out_ += "],\"usage\":" + usage_json().dump() + "}\n\n";
    }
    std::string piece(int32_t id) const {
        return tokenizer::sanitize_utf8(
            ctx_.engine.model().tokenizer().token_bytes(id, tokenizer::SkipSpecial::kNo));
    }
    json chunk_head() const {
        return {{"id", id_},
                {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", ctx_.served_model_name}};
    }
    // The common streamed chunk (text, and the finish when `finish` is set; no logprobs,
    // tool calls or token ids) written straight into its SSE line, no JSON value built.
    // False: a text or stop string that is not valid UTF-8 (the JSON path replaces what is
    // not).
    bool send_text_chunk(size_t index, ChoiceState& c, const std::string& text,
                         const ChoiceState* finish) {
        if (!tokenizer::is_valid_utf8(text) ||
            (finish && !tokenizer::is_valid_utf8(finish->stop_reason))) {
            return false;
        }
        std::string& out = out_;
        out += chunk_prefix_;
        out += std::to_string(index);
        if (chat_) {
            out += c.role_sent ? ",\"delta\":{" : ",\"delta\":{\"role\":\"assistant\"";
            // The end's delta has content only when text came with it (as the JSON path).
            if (!finish || !text.empty()) {
                out += c.role_sent ? "\"content\":\"" : ",\"content\":\"";
                append_json_escaped(out, text);
                out += '"';
            }
            out += '}';
            c.role_sent = true;
        } else {
            out += ",\"text\":\"";
            append_json_escaped(out, text);
            out += '"';
            if (finish && !finish->stop_reason.empty()) {
                out += ",\"stop_reason\":\"";
                append_json_escaped(out, finish->stop_reason);
                out += '"';
            }
        }
        out += ",\"logprobs\":null,\"finish_reason\":";
        if (finish) {
            out += '"';
            append_json_escaped(out, finish->finish);
            out += "\"}]}\n\n";
        } else {
            out += "null}]}\n\n";
        }
        return true;
    }
    void send_chunk(const json& j) {
        out_ += "data: ";
        out_ += j.dump(-1, ' ', false, json::error_handler_t::replace);
        out_ += "\n\n";
    }
    // Hands the chunks gathered since the last flush to the connection: one write per pump
    // (out_ keeps its capacity).
    void flush() {
        if (!out_.empty()) resp_->write(out_);
        out_.clear();
    }

    void on_event(size_t p, const engine::Event& ev);
    void add_logprobs(ChoiceState& c, const engine::Event& ev, json* delta);
    void stream_chunk(size_t index, ChoiceState& c, const engine::Event& ev, const json& delta_lp,
                      const std::string& text, const json& tool_calls);
    void on_request_done(PromptState& p, const engine::Event& ev);
    json usage_json() const;
    void finish();
    void record(int status);  // the request's stage record, once the answer is written
    void finish_stream(bool failed);
    void send_body();

    CallContext ctx_;
    const bool chat_, warmup_, stream_, include_usage_, token_ids_, want_logprobs_;
    std::vector<std::vector<int32_t>> prompt_ids_;  // return_token_ids only
    const int n_;
    const std::string id_;
    const int64_t created_;
    const std::string chunk_prefix_;  // a chunk's SSE line up to its choice's index
    std::shared_ptr<http::Responder> resp_;
    std::vector<PromptState> prompts_;
    std::vector<ChoiceState> choices_;
    engine::Usage usage_;
    std::string error_message_;
    FinishReason error_reason_ = FinishReason::kStop;
    bool complete_ = false;
    double http_output_s_ = 0;
    engine::RequestTimings slowest_;    // of its prompts, by end-to-end latency
    std::vector<double> itl_;           // every prompt's gaps
    std::vector<engine::Event> taken_;  // pump()'s scratch: a stream's queued events
    std::string out_;                   // SSE chunks not yet handed to the connection
};

void Call::on_event(size_t p, const engine::Event& ev) {
    const size_t index = p * size_t(n_) + size_t(ev.index);
    ChoiceState& c = choices_[index];
    if (!ev.token_ids.empty()) {  // one gap per step (a gathered event has several)
        const std::span<const Clock::time_point> times =
            ev.step_times.empty() ? std::span<const Clock::time_point>(&ev.time, 1)
                                  : std::span<const Clock::time_point>(ev.step_times);
        for (const Clock::time_point t : times) {
            if (c.last_token_time != Clock::time_point{}) {
                prompts_[p].itl.push_back(
                    std::chrono::duration<double>(t - c.last_token_time).count());
            }
            c.last_token_time = t;
        }
    }
    if (!stream_) c.text += ev.text;  // a whole body's text (a stream's goes out as it comes)
    std::string tool_text;
    const std::string* shown = &ev.text;  // what the client sees as content
    json tool_calls;                      // null (empty) unless the tools parser made calls
    if (c.tools) {
        ToolCallStream::Delta d = c.tools->push(ev.text);
        if (ev.finish) {
            ToolCallStream::Delta end = c.tools->finish();
            d.content += end.content;
            for (auto& t : end.tool_calls) d.tool_calls.push_back(std::move(t));
        }
        tool_text = std::move(d.content);
        shown = &tool_text;
        tool_calls = std::move(d.tool_calls);
    }
    const std::string& text = *shown;
    if (token_ids_) c.token_ids.insert(c.token_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
    json delta_lp;
    if (want_logprobs_ && !ev.logprobs.empty()) {
        add_logprobs(c, ev, stream_ ? &delta_lp : nullptr);
    }
    if (ev.finish) {
        c.finish = finish_name(*ev.finish);
        if (*ev.finish == FinishReason::kStop && c.tools && c.tools->made_calls()) {
            c.finish = "tool_calls";
        }
        c.stop_reason = ev.stop_reason;
        if (is_failure(*ev.finish)) {
            error_reason_ = *ev.finish;
            if (!ev.error.empty()) error_message_ = ev.error;
        }
    }
    if (stream_ && (!text.empty() || ev.finish || !delta_lp.is_null() || !tool_calls.empty() ||
                    (token_ids_ && !ev.token_ids.empty()))) {
        stream_chunk(index, c, ev, delta_lp, text, tool_calls);
    }
    if (ev.request_done) on_request_done(prompts_[p], ev);
}

void Call::add_logprobs(ChoiceState& c, const engine::Event& ev, json* delta) {
    for (const auto& lp : ev.logprobs) {
        const std::string t = piece(lp.token);
        if (chat_) {
            json top = json::array();
            for (const auto& [tid, l] : lp.top) {
                const std::string tt = piece(tid);
                top.push_back({{"token", tt},
                               {"logprob", l},
                               {"bytes", std::vector<uint8_t>(tt.begin(), tt.end())}});
            }
            json item = {{"token", t},
                         {"logprob", lp.logprob},
                         {"bytes", std::vector<uint8_t>(t.begin(), t.end())},
                         {"top_logprobs", top}};
            c.logprobs["content"].push_back(item);
            if (delta) (*delta)["content"].push_back(item);
            continue;
        }
        json top = json::object();
        for (const auto& [tid, l] : lp.top) top[piece(tid)] = l;
        for (json* o : {&c.logprobs, delta}) {
            if (o == nullptr) continue;
            (*o)["tokens"].push_back(t);
            (*o)["token_logprobs"].push_back(lp.logprob);
            (*o)["top_logprobs"].push_back(top);
            (*o)["text_offset"].push_back(0);
        }
    }
}

void Call::stream_chunk(size_t index, ChoiceState& c, const engine::Event& ev, const json& delta_lp,
                        const std::string& text, const json& tool_calls) {
    if (delta_lp.is_null() && tool_calls.empty() && !token_ids_ &&
        send_text_chunk(index, c, text, ev.finish ? &c : nullptr)) {
        return;
    }
    json choice = {{"index", index},
                   {"logprobs", delta_lp.is_null() ? json(nullptr) : delta_lp},
                   {"finish_reason", ev.finish ? json(c.finish) : json(nullptr)}};
    if (chat_) {
        json delta = json::object();
        if (!c.role_sent) {
            delta["role"] = "assistant";
            c.role_sent = true;
        }
        if (!text.empty() || (!ev.finish && tool_calls.empty())) delta["content"] = text;
        if (!tool_calls.empty()) delta["tool_calls"] = tool_calls;
        choice["delta"] = delta;
    } else {
        choice["text"] = text;
        if (ev.finish && !c.stop_reason.empty()) choice["stop_reason"] = c.stop_reason;
    }
    if (token_ids_) {
        choice["token_ids"] = ev.token_ids;
        if (!c.prompt_ids_sent) choice["prompt_token_ids"] = prompt_ids_[index / size_t(n_)];
        c.prompt_ids_sent = true;
    }
    json j = chunk_head();
    j["choices"] = json::array({choice});
    send_chunk(j);
}

void Call::on_request_done(PromptState& p, const engine::Event& ev) {
    p.done = true;
    usage_.prompt_tokens += ev.usage.prompt_tokens;
    usage_.completion_tokens += ev.usage.completion_tokens;
    usage_.cached_tokens += ev.usage.cached_tokens;
    if (ev.timings.e2e_seconds() >= slowest_.e2e_seconds()) slowest_ = ev.timings;
    itl_.insert(itl_.end(), p.itl.begin(), p.itl.end());
    if (!warmup_) ctx_.metrics.record_finished(ev, p.itl);
}

json Call::usage_json() const {
    json u = {{"prompt_tokens", usage_.prompt_tokens},
              {"completion_tokens", usage_.completion_tokens},
              {"total_tokens", usage_.prompt_tokens + usage_.completion_tokens}};
    if (usage_.cached_tokens > 0) {
        u["prompt_tokens_details"] = {{"cached_tokens", usage_.cached_tokens}};
    }
    return u;
}

void Call::finish() {
    complete_ = true;
    for (auto& p : prompts_) p.stream->set_notify({});  // releases the notifiers' hold on this
    --ctx_.in_flight;
    const bool failed = error_reason_ != FinishReason::kStop && usage_.completion_tokens == 0;
    if ((stream_ || !failed) && !warmup_) ctx_.metrics.count_response(200);
    const int status = !failed ? 200 : error_reason_ == FinishReason::kRejected ? 429 : 500;
    if (!warmup_) record(stream_ ? 200 : status);
    if (stream_) {
        finish_stream(failed);
    } else if (failed) {
        ctx_.metrics.count_response(status);
        http::Response r =
            api_error(status, error_message_.empty() ? "the request failed" : error_message_,
                      status == 429 ? "rate_limit_error" : "server_error");
        r.headers.emplace_back("X-Request-Id", ctx_.request_id);
        resp_->send(std::move(r));
    } else {
        send_body();
    }
}

void Call::record(int status) {
    RequestLog& log = ctx_.metrics.requests();
    if (error_reason_ == FinishReason::kRejected) log.count_error(ErrorKind::kRejected);
    if (error_reason_ == FinishReason::kTimeout) log.count_error(ErrorKind::kTimeout);
    if (error_reason_ == FinishReason::kError) log.count_error(ErrorKind::kInternal);
    RequestRecord r;
    r.id = id_;
    r.request_id = ctx_.request_id;
    r.route = ctx_.route;
    r.endpoint = chat_ ? "chat" : "completions";
    r.status = status;
    r.finish_reason = choices_.empty() ? "" : choices_.back().finish;
    r.prompt_tokens = usage_.prompt_tokens;
    r.completion_tokens = usage_.completion_tokens;
    r.finished_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
    r.timings = slowest_;
    r.http_output_s = http_output_s_;
    // The network write is known once the socket has taken the whole answer.
    resp_->on_complete([&log, r = std::move(r), itl = std::move(itl_)](double write_s) mutable {
        r.network_write_s = write_s;
        log.add(std::move(r), itl);
    });
}

void Call::finish_stream(bool failed) {
    if (failed) {
        send_chunk(
            json{{"error",
                  {{"message", error_message_.empty() ? "the request failed" : error_message_},
                   {"type", "server_error"},
                   {"param", nullptr},
                   {"code", 500}}}});
    } else if (include_usage_) {
        send_usage_chunk();
    }
    out_ += "data: [DONE]\n\n";
    resp_->write_last(out_);  // the last chunks and the stream's end: one write
    out_.clear();
}

void Call::send_body() {
    json choices = json::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
        const ChoiceState& c = choices_[i];
        json choice = {{"index", i},
                       {"logprobs", want_logprobs_ ? c.logprobs : json(nullptr)},
                       {"finish_reason", c.finish}};
        if (chat_ && c.tools) {
            const bool calls = c.tools->made_calls();
            const std::string& content = c.tools->content();
            choice["message"] = {
                {"role", "assistant"},
                {"content", calls && content.empty() ? json(nullptr) : json(content)}};
            if (calls) choice["message"]["tool_calls"] = c.tools->calls();
        } else if (chat_) {
            choice["message"] = {{"role", "assistant"}, {"content", c.text}};
        } else {
            choice["text"] = c.text;
            choice["stop_reason"] = c.stop_reason.empty() ? json(nullptr) : json(c.stop_reason);
        }
        if (token_ids_) {
            choice["token_ids"] = c.token_ids;
            choice["prompt_token_ids"] = prompt_ids_[i / size_t(n_)];
        }
        choices.push_back(choice);
    }
    json body = {{"id", id_},           {"object", chat_ ? "chat.completion" : "text_completion"},
                 {"created", created_}, {"model", ctx_.served_model_name},
                 {"choices", choices},  {"usage", usage_json()}};
    http::Response r = json_response(200, body);
    r.headers.emplace_back("X-Request-Id", ctx_.request_id);
    resp_->send(std::move(r));
}

// Hands the call to the I/O thread: stream notifiers post pump() there; a disconnect cancels.
// A streaming call's pump runs every `stream_interval` engine events (--stream-interval); a
// whole-body call's only when a sample finishes (nothing is written before that).
http::Reply run_later(std::shared_ptr<Call> call, std::shared_ptr<PumpQueue> pumps,
                      int stream_interval) {
    const int interval = call->streaming() ? stream_interval : std::numeric_limits<int>::max();
    return http::Reply::later([call, pumps, interval](std::shared_ptr<http::Responder> resp) {
        call->attach(resp);
        if (call->streaming()) {
            resp->start_stream(200, "text/event-stream", {{"X-Request-Id", call->request_id()}});
        }
        std::weak_ptr<Call> weak = call;
        resp->on_disconnect([weak] {
            if (auto c = weak.lock()) c->cancel_all();
        });
        // The notifiers own the call until it completes (finish() clears them).
        call->for_each_stream([&](engine::RequestStream& s) {
            if (pumps) {
                auto pump = std::make_shared<const std::function<void()>>([call] { call->pump(); });
                s.set_notify([pump, resp, pumps] { pumps->add(pump, *resp); }, interval);
            } else {
                s.set_notify([call, resp] { resp->post([call] { call->pump(); }); }, interval);
            }
        });
        resp->post([call] { call->pump(); });  // events pushed before the notifiers were set
    });
}

}  // namespace

void PumpQueue::add(Pump pump, http::Responder& resp) {
    bool first = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        first = pending_.empty();
        pending_.push_back(std::move(pump));
    }
    // The drain runs on the I/O thread (every responder of a server posts to the same one).
    if (first) resp.post([self = shared_from_this()] { self->drain(); });
}

void PumpQueue::drain() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        draining_.swap(pending_);
    }
    for (const Pump& pump : draining_) (*pump)();
    draining_.clear();
}

http::Reply start_completion(const http::Request& req, Endpoint endpoint, Origin origin,
                             const CallContext& ctx) {
    http::Response err;
    auto body = parse_body(req, err);
    if (!body) return reply(err);
    const auto& mc = ctx.engine.model().config();
    const bool chat = endpoint == Endpoint::kChatCompletions;
    // The body again with its key order kept (a tool's parameters in the prompt, a schema's
    // properties in the output), where it matters: chat messages and shaped outputs.
    const nlohmann::ordered_json ordered =
        chat || shapes_output(*body) ? nlohmann::ordered_json::parse(req.body, nullptr, false)
                                     : nlohmann::ordered_json();
    // generation_config.json's defaults under the fields the request sets.
    const model::GenerationDefaults& gd = ctx.engine.model().generation_defaults();
    engine::SamplingParams defaults;
    defaults.temperature = gd.temperature.value_or(defaults.temperature);
    defaults.top_p = gd.top_p.value_or(defaults.top_p);
    defaults.top_k = gd.top_k.value_or(defaults.top_k);
    defaults.min_p = gd.min_p.value_or(defaults.min_p);
    defaults.repetition_penalty = gd.repetition_penalty.value_or(defaults.repetition_penalty);
    auto parsed =
        parse_generation_request(*body, chat,
                                 {ctx.served_model_name, ctx.engine.config().sched.max_model_len,
                                  mc.vocab_size, ctx.chat, ordered.is_object() ? &ordered : nullptr,
                                  ctx.constraints, ctx.tool_parser, gd.any() ? &defaults : nullptr},
                                 ctx.engine.model().tokenizer());
    if (auto* e = std::get_if<RequestError>(&parsed)) {
        return reply(api_error(e->status, e->message, e->type, e->param));
    }
    ParsedRequest& pr = std::get<ParsedRequest>(parsed);
    if (origin != Origin::kWarmup) ctx.metrics.requests().count_request();
    auto call = std::make_shared<Call>(ctx, endpoint, origin, pr);
    for (auto& prompt : pr.prompts) {
        engine::Request r;
        r.prompt_ids = std::move(prompt);
        r.sampling = pr.sampling;
        r.priority = pr.priority;
        r.resumed_tokens = int32_t(pr.resume_ids.size());
        auto s = ctx.engine.submit(std::move(r));
        if (!s.ok()) {
            call->cancel_all();
            if (s.error().code != ErrorCode::kResourceExhausted) {
                return bad_request(s.error().message);
            }
            if (origin != Origin::kWarmup) ctx.metrics.requests().count_error(ErrorKind::kRejected);
            http::Response resp = api_error(429, s.error().message, "rate_limit_error");
            const int retry = int(std::ceil(ctx.engine.retry_after_seconds()));
            resp.headers.emplace_back("Retry-After", std::to_string(retry));
            return reply(resp);
        }
        call->add_prompt(*s);
    }
    ++ctx.in_flight;
    return run_later(std::move(call), ctx.pumps, ctx.stream_interval);
}

}  // namespace pagoda::server
