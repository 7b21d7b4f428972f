// run_plan: a plan sent to the targets over HTTP, open or closed loop, with SSE timings.
#include "bench/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

namespace pagoda::bench {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<double> ttfts;  // for the live p99
    int64_t finished = 0, failed = 0, sent = 0;
};

// Parses a streamed completion into the record: SSE "data:" events, token chunks, usage.
struct StreamParser {
    RequestRecord* rec;
    bool chat;
    Clock::time_point t0;
    std::string buf;
    std::string body;  // kept for error statuses
    bool done_seen = false;
    double finish_s = -1;  // when the chunk with finish_reason came (no text in it)

    double now() const { return std::chrono::duration<double>(Clock::now() - t0).count(); }

    void feed(std::string_view data) {
        if (rec->status != 200) {
            if (body.size() < 4096) body.append(data);
            return;
        }
        buf.append(data);
        size_t start = 0, pos;
        while ((pos = buf.find('\n', start)) != std::string::npos) {
            std::string_view line(buf.data() + start, pos - start);
            start = pos + 1;
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            if (!line.starts_with("data:")) continue;
            std::string_view payload = line.substr(5);
            while (!payload.empty() && payload.front() == ' ') payload.remove_prefix(1);
            if (payload == "[DONE]") {
                done_seen = true;
                continue;
            }
            event(payload);
        }
        buf.erase(0, start);
    }

    // Where the value of "key" starts in a JSON text (the quoted key and colon given), or
    // npos. Keys are matched outside strings only: inside one, a quote is escaped.
    static size_t value_at(std::string_view s, std::string_view quoted_key) {
        size_t p = s.find(quoted_key);
        if (p == std::string_view::npos) return p;
        p += quoted_key.size();
        while (p < s.size() && s[p] == ' ') ++p;
        return p < s.size() ? p : std::string_view::npos;
    }

    void token_or_finish(double t, bool is_string, bool has_text, bool finished) {
        // A token chunk: it has text, or it is a mid-stream chunk (a token that is not yet
        // printable).
        if (has_text || (!finished && is_string)) {
            if (rec->first_token_s < 0) rec->first_token_s = t;
            rec->token_s.push_back(t);
        } else if (finished && finish_s < 0) {
            finish_s = t;
        }
    }

    // A token chunk read without building a JSON value (the client keeps up with a server
    // streaming tens of thousands of tokens a second); false: parse it whole.
    bool quick_event(double t, std::string_view payload) {
        if (payload.find("\"usage\"") != std::string_view::npos ||
            payload.find("\"error\"") != std::string_view::npos) {
            return false;
        }
        const size_t f = value_at(payload, "\"finish_reason\":");
        if (f == std::string_view::npos) return false;
        const size_t v = value_at(payload, chat ? "\"content\":" : "\"text\":");
        if (v == std::string_view::npos) return true;  // no text field: not a token
        const bool is_string = payload[v] == '"';
        const bool has_text = is_string && v + 1 < payload.size() && payload[v + 1] != '"';
        token_or_finish(t, is_string, has_text, payload[f] != 'n');
        return true;
    }

    void event(std::string_view payload) {
        double t = now();
        if (quick_event(t, payload)) return;
        json j = json::parse(payload, nullptr, false);
        if (!j.is_object()) return;
        if (j.contains("error")) {
            rec->error_kind = "stream";
            const json& e = j["error"];
            rec->error = e.is_object() && e.contains("message") && e["message"].is_string()
                             ? e["message"].get<std::string>()
                             : e.dump();
            return;
        }
        if (j.contains("usage") && j["usage"].is_object()) {
            const json& u = j["usage"];
            if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer())
                rec->prompt_tokens = u["prompt_tokens"].get<int64_t>();
            if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
                rec->completion_tokens = u["completion_tokens"].get<int64_t>();
            }
        }
        if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
        const json& c = j["choices"][0];
        const json* text = nullptr;
        if (chat) {
            if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content"))
                text = &c["delta"]["content"];
        } else if (c.contains("text")) {
            text = &c["text"];
        }
        if (!text) return;
        bool has_text = text->is_string() && !text->get_ref<const std::string&>().empty();
        bool finished = c.contains("finish_reason") && !c["finish_reason"].is_null();
        token_or_finish(t, text->is_string(), has_text, finished);
    }
};

std::string request_body(const Scenario& s, const PlannedRequest& p, const std::string& model) {
    json b = {{"model", model},     {"max_tokens", p.output_len},
              {"stream", true},     {"stream_options", {{"include_usage", true}}},
              {"ignore_eos", true}, {"temperature", 0}};
    if (s.endpoint == "chat") {
        b["messages"] = json::array({{{"role", "user"}, {"content", p.prompt}}});
    } else {
        b["prompt"] = p.prompt;
    }
    return b.dump();
}

// One run of a plan, in named phases: run_closed() keeps `concurrency` requests going, or
// run_open() sends every request at its time; finished() records each answer (and sends a
// closed loop's next request); check() applies the stop bounds and draws the progress line;
// drain() waits for what is in flight; the sampler thread reads the server's gauges.
class PlanRun {
  public:
    PlanRun(const Scenario& s, const std::vector<PlannedRequest>& plan,
            std::vector<Target*> targets, const RunOptions& opts)
        : s_(s),
          plan_(plan),
          targets_(std::move(targets)),
          opts_(opts),
          closed_(s.arrival.kind == Arrival::Kind::kClosed),
          // A closed loop reuses the plan cyclically when only a duration limits the run.
          limit_(closed_ ? (s.requests > 0 ? size_t(s.requests) : size_t(1) << 40) : plan.size()),
          shared_(std::make_shared<Shared>()),
          t0_(Clock::now()) {
        const size_t reserve =
            std::min<size_t>(limit_, closed_ ? std::max<size_t>(plan.size(), 1) * 64 : plan.size());
        res_.records.reserve(reserve);
        parsers_.reserve(reserve);
    }

    RunResult run() {
        start_sampler();
        if (closed_) {
            run_closed();
        } else {
            run_open();
        }
        drain();
        check();
        stop_sampler();
        if (opts_.progress) std::fprintf(stderr, "\n");
        res_.duration_s = now();
        return std::move(res_);
    }

  private:
    double now() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

    void run_closed() {
        const size_t c = std::min<size_t>(size_t(s_.arrival.concurrency), limit_);
        for (size_t k = 0; k < c; ++k) send(next_.fetch_add(1), false);
        while (true) {
            std::unique_lock<std::mutex> lk(shared_->mu);
            shared_->cv.wait_for(lk, std::chrono::milliseconds(200));
            const bool idle = shared_->finished == shared_->sent;
            lk.unlock();
            check();
            if (s_.duration_s > 0 && now() >= s_.duration_s) stop_sending_ = true;
            if (idle && (stop_sending_.load() || next_.load() >= limit_)) break;
        }
    }

    void run_open() {
        for (size_t i = 0; i < plan_.size() && !stop_sending_.load(); ++i) {
            const auto due = t0_ + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(plan_[i].at_s));
            while (Clock::now() < due && !stop_sending_.load()) {
                std::this_thread::sleep_until(
                    std::min(due, Clock::now() + std::chrono::milliseconds(100)));
                check();
            }
            if (stop_sending_.load()) break;
            send(i, false);
        }
    }

    void drain() {
        while (true) {
            std::unique_lock<std::mutex> lk(shared_->mu);
            if (shared_->finished == shared_->sent) break;
            shared_->cv.wait_for(lk, std::chrono::milliseconds(200));
            lk.unlock();
            check();
        }
    }

    // A record and its parser for request `i`; null when a closed loop outgrew the records
    // (their capacity is fixed up front: callbacks hold pointers into them).
    std::pair<RequestRecord*, StreamParser*> new_record(bool counted) {
        std::lock_guard<std::mutex> lk(rec_mu_);
        if (res_.records.size() == res_.records.capacity()) {
            stop_sending_ = true;
            if (counted) {
                std::lock_guard<std::mutex> lk2(shared_->mu);
                --shared_->sent;
            }
            shared_->cv.notify_all();
            return {nullptr, nullptr};
        }
        res_.records.emplace_back();
        parsers_.push_back(std::make_unique<StreamParser>());
        return {&res_.records.back(), parsers_.back().get()};
    }

    // `counted`: the caller already added this request to shared_->sent (under its lock).
    void send(size_t i, bool counted) {
        const PlannedRequest& p = plan_[i % plan_.size()];
        Target* tg = targets_[i % targets_.size()];
        const std::pair<RequestRecord*, StreamParser*> made = new_record(counted);
        RequestRecord* rec = made.first;  // named, not bound: lambdas capture them (clang 14)
        StreamParser* sp = made.second;
        if (rec == nullptr) return;
        rec->klass = p.klass;
        rec->target = int(i % targets_.size());
        rec->scheduled_s = closed_ ? now() : p.at_s;
        rec->target_input = p.input_len;
        rec->target_output = p.output_len;
        sp->rec = rec;
        sp->chat = s_.endpoint == "chat";
        sp->t0 = t0_;
        if (!counted) {
            std::lock_guard<std::mutex> lk(shared_->mu);
            ++shared_->sent;
        }
        http::ClientCallbacks cb;
        cb.on_sent = [rec, sp] { rec->sent_s = sp->now(); };
        cb.on_status = [rec](int status) { rec->status = status; };
        cb.on_retry = [rec] { ++rec->retries; };
        cb.on_body = [sp](std::string_view d) { sp->feed(d); };
        cb.on_done = [this, rec, sp](const http::ClientError* e) { finished(*rec, *sp, e); };
        tg->client->start(
            {.method = "POST",
             .path = s_.endpoint == "chat" ? "/v1/chat/completions" : "/v1/completions",
             .body = request_body(s_, p, tg->model),
             .content_type = "application/json",
             .headers = {}},
            std::move(cb));
    }

    // The outcome of one answer, from its status, body and stream.
    static void classify(RequestRecord& rec, const StreamParser& sp, const http::ClientError* e) {
        if (e) {
            rec.error_kind = http::client_error_kind_name(e->kind);
            rec.error = e->message;
        } else if (rec.status != 200) {
            rec.error_kind = rec.status >= 500 ? "http_5xx" : "http_4xx";
            json j = json::parse(sp.body, nullptr, false);
            rec.error = fmt::format("HTTP {}: {}", rec.status,
                                    j.is_object() && j.contains("error") &&
                                            j["error"].is_object() && j["error"].contains("message")
                                        ? j["error"]["message"].dump()
                                        : sp.body.substr(0, 200));
        } else if (rec.error_kind.empty() && !sp.done_seen) {
            rec.error_kind = "stream";
            rec.error = "the stream ended without data: [DONE]";
        } else if (rec.error_kind.empty() && rec.token_s.empty() && rec.completion_tokens > 0 &&
                   sp.finish_s >= 0) {
            // The only tokens had no printable text yet (a partial UTF-8 sequence): they
            // arrived with the final chunk.
            rec.first_token_s = sp.finish_s;
            rec.token_s.push_back(sp.finish_s);
        } else if (rec.error_kind.empty() && rec.token_s.empty()) {
            rec.error_kind = "stream";
            rec.error = "the stream carried no tokens";
        }
    }

    void finished(RequestRecord& rec, const StreamParser& sp, const http::ClientError* e) {
        rec.done_s = sp.now();
        if (rec.sent_s < 0) rec.sent_s = rec.done_s;
        classify(rec, sp, e);
        // The follow-up of a closed loop is counted as sent under the same lock that counts
        // this one finished, so the main thread never sees an idle moment between them.
        size_t follow = SIZE_MAX;
        {
            std::lock_guard<std::mutex> lk(shared_->mu);
            ++shared_->finished;
            if (!rec.ok()) ++shared_->failed;
            if (rec.ok() && rec.first_token_s >= 0) shared_->ttfts.push_back(rec.ttft_ms());
            if (closed_ && !stop_sending_.load()) {
                const size_t n = next_.fetch_add(1);
                if (n < limit_ && (s_.duration_s <= 0 || now() < s_.duration_s)) {
                    follow = n;
                    ++shared_->sent;
                } else {
                    stop_sending_ = true;
                }
            }
        }
        shared_->cv.notify_all();
        if (follow != SIZE_MAX) send(follow, true);
    }

    // The server timeline: the first target's gauges once a period, on a thread of its own.
    void start_sampler() {
        if (opts_.sample_every_s <= 0 || targets_.empty()) return;
        sampling_ = true;
        sampler_ = std::thread([this] {
            std::unique_lock<std::mutex> lk(sample_mu_);
            for (int k = 0; sampling_.load(); ++k) {
                lk.unlock();
                ServerSample smp{now(), timeline_gauges(scrape_metrics(*targets_[0]))};
                lk.lock();
                res_.server.push_back(std::move(smp));
                const auto due =
                    t0_ + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(opts_.sample_every_s * (k + 1)));
                sample_cv_.wait_until(lk, due, [&] { return !sampling_.load(); });
            }
        });
    }

    void stop_sampler() {
        {
            std::lock_guard<std::mutex> lk(sample_mu_);
            sampling_ = false;
        }
        sample_cv_.notify_all();
        if (sampler_.joinable()) sampler_.join();
    }

    // The stop bounds (interrupt, error rate, requests in flight) and the progress line.
    void check() {
        const double t = now();
        std::unique_lock<std::mutex> lk(shared_->mu);
        const int64_t in_flight = shared_->sent - shared_->finished;
        if (res_.aborted.empty()) {
            if (opts_.interrupted && opts_.interrupted()) res_.aborted = "interrupted";
            if (s_.stop_error_rate > 0 && shared_->finished >= 20 &&
                double(shared_->failed) / double(shared_->finished) > s_.stop_error_rate) {
                res_.aborted =
                    fmt::format("error rate {:.1f}% passed the stop bound {:.1f}%",
                                100.0 * double(shared_->failed) / double(shared_->finished),
                                100 * s_.stop_error_rate);
            }
            if (s_.stop_in_flight > 0 && in_flight > s_.stop_in_flight) {
                res_.aborted = fmt::format("{} requests in flight passed the stop bound {}",
                                           in_flight, s_.stop_in_flight);
            }
            if (!res_.aborted.empty()) stop_sending_ = true;
        }
        if (opts_.progress && t - last_progress_ >= 0.5) {
            last_progress_ = t;
            progress_line(t, in_flight);
        }
    }

    void progress_line(double t, int64_t in_flight) {  // shared_->mu held
        std::vector<double> v = shared_->ttfts;
        double p99 = NAN;
        if (!v.empty()) {
            std::sort(v.begin(), v.end());
            p99 = percentile_sorted(v, 0.99);
        }
        const std::string total =
            closed_ && s_.requests <= 0 ? "" : fmt::format("/{}", closed_ ? limit_ : plan_.size());
        std::fprintf(stderr,
                     "\r\033[K%s%.0fs  %lld%s sent  %lld done  %lld in flight  %.1f req/s  p99 "
                     "TTFT %s  %lld errors",
                     opts_.label.empty() ? "" : (opts_.label + "  ").c_str(), t,
                     (long long)shared_->sent, total.c_str(), (long long)shared_->finished,
                     (long long)in_flight, t > 0 ? double(shared_->finished) / t : 0.0,
                     std::isnan(p99) ? "-" : fmt::format("{:.0f} ms", p99).c_str(),
                     (long long)shared_->failed);
        std::fflush(stderr);
    }

    const Scenario& s_;
    const std::vector<PlannedRequest>& plan_;
    std::vector<Target*> targets_;
    const RunOptions& opts_;
    const bool closed_;
    const size_t limit_;
    RunResult res_;
    std::shared_ptr<Shared> shared_;
    const Clock::time_point t0_;
    std::vector<std::unique_ptr<StreamParser>> parsers_;
    std::mutex rec_mu_;  // guards growth of records/parsers (a closed loop grows from callbacks)
    std::atomic<size_t> next_{0};
    std::atomic<bool> stop_sending_{false};
    std::atomic<bool> sampling_{false};
    std::mutex sample_mu_;  // guards res_.server
    std::condition_variable sample_cv_;
    std::thread sampler_;
    double last_progress_ = -1;
};

}  // namespace

RunResult run_plan(const Scenario& s, const std::vector<PlannedRequest>& plan,
                   std::vector<Target*> targets, const RunOptions& opts) {
    return PlanRun(s, plan, std::move(targets), opts).run();
}

}  // namespace pagoda::bench
