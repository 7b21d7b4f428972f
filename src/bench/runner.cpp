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

Result<http::ClientResponse> get(http::Client& c, const std::string& path) {
    return c.fetch({.method = "GET", .path = path, .body = {}, .content_type = {}, .headers = {}});
}

Result<http::ClientResponse> post_json(http::Client& c, const std::string& path, const json& body) {
    return c.fetch({.method = "POST",
                    .path = path,
                    .body = body.dump(),
                    .content_type = "application/json",
                    .headers = {}});
}

// One /tokenize dialect: how to ask, and where the count is in the answer.
struct TokenizeShape {
    std::function<json(const std::string& text)> body;
    std::function<std::optional<int64_t>(const json& reply)> count;
};

TokenCounter tokenize_counter(http::Client* c, TokenizeShape shape) {
    return [c, shape = std::move(shape)](const std::string& text) -> Result<int64_t> {
        auto r = post_json(*c, "/tokenize", shape.body(text));
        if (!r) return r.error();
        json j = json::parse(r->body, nullptr, false);
        std::optional<int64_t> n =
            r->status == 200 && j.is_object() ? shape.count(j) : std::nullopt;
        if (!n)
            return make_error(ErrorCode::kIo, "/tokenize answered HTTP {}: {}", r->status,
                              r->body.substr(0, 200));
        return *n;
    };
}

}  // namespace

Result<Target> connect_target(const std::string& url, const std::string& api_key,
                              const std::string& model, double timeout_s) {
    Target t;
    t.url = url;
    http::ClientOptions co;
    co.connect_timeout_s = 5;
    co.read_timeout_s = timeout_s;
    if (!api_key.empty()) co.headers.emplace_back("Authorization", "Bearer " + api_key);
    PAGODA_ASSIGN_OR_RETURN(t.client, http::Client::create(url, co));
    auto r = get(*t.client, "/v1/models");
    if (!r)
        return make_error(ErrorCode::kIo, "cannot reach the server at {}: {}", url,
                          r.error().message);
    if (r->status == 401 || r->status == 403) {
        return make_error(ErrorCode::kInvalidArgument,
                          "{} refused the request (HTTP {}): pass the right --api-key", url,
                          r->status);
    }
    json j = json::parse(r->body, nullptr, false);
    if (r->status != 200 || !j.is_object() || !j.contains("data") || !j["data"].is_array()) {
        return make_error(
            ErrorCode::kInvalidArgument,
            "{} does not look like an OpenAI-compatible server: GET /v1/models gave HTTP {} ({})",
            url, r->status, r->body.substr(0, 200));
    }
    json entry = json::object();
    for (const auto& m : j["data"]) {
        if (!m.is_object() || !m.contains("id") || !m["id"].is_string()) continue;
        if (model.empty() || m["id"] == model) {
            entry = m;
            break;
        }
    }
    if (!entry.contains("id")) {
        std::string ids;
        for (const auto& m : j["data"]) {
            if (m.is_object() && m.contains("id") && m["id"].is_string())
                ids += (ids.empty() ? "" : ", ") + m["id"].get<std::string>();
        }
        if (model.empty())
            return make_error(ErrorCode::kInvalidArgument, "{} serves no models", url);
        return make_error(ErrorCode::kInvalidArgument,
                          "{} does not serve model '{}'; it serves: {}", url, model, ids);
    }
    t.model = entry["id"].get<std::string>();
    if (entry.contains("max_model_len") && entry["max_model_len"].is_number_integer()) {
        t.max_model_len = entry["max_model_len"].get<int64_t>();
    }
    json info = {{"model", entry}};
    auto metrics = scrape_metrics(t);
    json cache = json::object();
    for (const auto& [k, v] : metrics) {
        if (k.find("_info{") != std::string::npos) cache[k] = v;
    }
    if (!cache.empty()) info["config"] = cache;
    t.info_json = info.dump();
    return t;
}

TokenCounter server_token_counter(Target& t) {
    const std::string model = t.model;
    // Pagoda and vLLM: {"model", "prompt"} -> {"count"}; llama.cpp: {"content"} -> {"tokens"}.
    std::vector<TokenizeShape> shapes = {
        {[model](const std::string& text) {
             return json{{"model", model}, {"prompt", text}};
         },
         [](const json& j) -> std::optional<int64_t> {
             if (!j.contains("count") || !j["count"].is_number_integer()) return std::nullopt;
             return j["count"].get<int64_t>();
         }},
        {[](const std::string& text) {
             return json{{"content", text}, {"add_special", true}};
         },
         [](const json& j) -> std::optional<int64_t> {
             if (!j.contains("tokens") || !j["tokens"].is_array()) return std::nullopt;
             return int64_t(j["tokens"].size());
         }},
    };
    for (auto& shape : shapes) {
        TokenCounter counter = tokenize_counter(t.client.get(), std::move(shape));
        auto probe = counter("hello");
        if (probe && *probe > 0) return counter;
    }
    return {};
}

TokenCounter approximate_token_counter() {
    return [](const std::string& text) -> Result<int64_t> {
        return int64_t(1 + (text.size() + 3) / 4);
    };
}

std::map<std::string, double> scrape_metrics(Target& t) {
    std::map<std::string, double> out;
    auto r = get(*t.client, "/metrics");
    if (!r || r->status != 200) return out;
    std::istringstream in(r->body);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        // name{labels} value [timestamp]; label values may contain spaces, so split after '}'.
        size_t end = line.find('}');
        size_t sp = line.find(' ', end == std::string::npos ? 0 : end);
        if (sp == std::string::npos) continue;
        char* e = nullptr;
        std::string val = line.substr(sp + 1);
        double v = std::strtod(val.c_str(), &e);
        if (e == val.c_str()) continue;
        out[line.substr(0, sp)] = v;
    }
    return out;
}

std::map<std::string, double> timeline_gauges(const std::map<std::string, double>& scrape) {
    // Short name, series name, a label the series must carry ("" for any).
    static const char* const kPicks[][3] = {
        {"waiting", "vllm:num_requests_waiting", ""},
        {"running", "vllm:num_requests_running", ""},
        {"kv_usage", "vllm:kv_cache_usage_perc", ""},
        {"warm_level", "pagoda_warm_level", ""},
        {"forecast_5m", "pagoda_forecast_requests_per_second", "horizon=\"5m\""},
        {"forecast_15m", "pagoda_forecast_requests_per_second", "horizon=\"15m\""},
        {"observed_rps", "pagoda_forecast_observed_requests_per_second", ""},
        {"recommended_replicas", "pagoda_forecast_recommended_replicas", ""},
    };
    std::map<std::string, double> out;
    for (const auto& [k, v] : scrape) {
        const std::string name = k.substr(0, k.find('{'));
        for (const auto& p : kPicks) {
            if (name == p[1] && (p[2][0] == '\0' || k.find(p[2]) != std::string::npos)) {
                out[p[0]] = v;
            }
        }
    }
    return out;
}

std::string metric_deltas_json(const std::map<std::string, double>& before,
                               const std::map<std::string, double>& after) {
    json out = json::object();
    auto delta = [&](const std::string& k) {
        auto a = after.find(k);
        if (a == after.end()) return 0.0;
        auto b = before.find(k);
        return a->second - (b == before.end() ? 0.0 : b->second);
    };
    for (const auto& [k, v] : after) {
        size_t brace = k.find('{');
        std::string name = k.substr(0, brace),
                    labels = brace == std::string::npos ? "" : k.substr(brace);
        if (name.ends_with("_bucket")) continue;
        if (name.ends_with("_count")) {
            std::string base = name.substr(0, name.size() - 6);
            double n = delta(k), sum = delta(base + "_sum" + labels);
            if (n <= 0) continue;
            json h = {{"count", n}};
            if (base.ends_with("_seconds")) {
                h["mean_ms"] = sum / n * 1000;
            } else {
                h["mean"] = sum / n;
            }
            out[base + labels] = h;
        } else if (name.ends_with("_total")) {
            double d = delta(k);
            if (d != 0) out[k] = d;
        }
    }
    return out.dump();
}

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
        size_t pos;
        while ((pos = buf.find('\n')) != std::string::npos) {
            std::string line = buf.substr(0, pos);
            buf.erase(0, pos + 1);
            if (!line.empty() && line.back() == '\r') line.pop_back();
            if (!line.starts_with("data:")) continue;
            std::string_view payload(line);
            payload.remove_prefix(5);
            while (!payload.empty() && payload.front() == ' ') payload.remove_prefix(1);
            if (payload == "[DONE]") {
                done_seen = true;
                continue;
            }
            event(payload);
        }
    }

    void event(std::string_view payload) {
        double t = now();
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
        // A token chunk: it has text, or it is a mid-stream chunk (a token that is not yet
        // printable).
        if (has_text || (!finished && text->is_string())) {
            if (rec->first_token_s < 0) rec->first_token_s = t;
            rec->token_s.push_back(t);
        } else if (finished && finish_s < 0) {
            finish_s = t;
        }
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

}  // namespace

RunResult run_plan(const Scenario& s, const std::vector<PlannedRequest>& plan,
                   std::vector<Target*> targets, const RunOptions& opts) {
    RunResult res;
    const bool closed = s.arrival.kind == Arrival::Kind::kClosed;
    // Closed loop reuses the plan cyclically when only a duration limits the run.
    const size_t limit =
        closed ? (s.requests > 0 ? size_t(s.requests) : size_t(1) << 40) : plan.size();
    const size_t reserve =
        std::min<size_t>(limit, closed ? std::max<size_t>(plan.size(), 1) * 64 : plan.size());
    res.records.reserve(reserve);
    auto shared = std::make_shared<Shared>();
    std::atomic<bool> stop_sending{false};
    const auto t0 = Clock::now();
    auto now = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    std::vector<std::unique_ptr<StreamParser>> parsers;
    parsers.reserve(reserve);
    // Records live in a deque-like stable store: indexes are handed to callbacks.
    std::mutex rec_mu;  // guards growth of records/parsers (closed loop grows from callbacks)
    std::atomic<size_t> next{0};

    // `counted`: the caller already added this request to shared->sent (under its lock).
    std::function<void(size_t, bool)> send;
    send = [&](size_t i, bool counted) {
        const PlannedRequest& p = plan[i % plan.size()];
        Target* tg = targets[i % targets.size()];
        RequestRecord* rec;
        StreamParser* sp;
        {
            std::lock_guard<std::mutex> lk(rec_mu);
            if (res.records.size() == res.records.capacity()) {
                // Capacity is fixed up front; a closed loop that outgrows it stops sending.
                stop_sending = true;
                if (counted) {
                    std::lock_guard<std::mutex> lk2(shared->mu);
                    --shared->sent;
                }
                shared->cv.notify_all();
                return;
            }
            res.records.emplace_back();
            rec = &res.records.back();
            parsers.push_back(std::make_unique<StreamParser>());
            sp = parsers.back().get();
        }
        rec->klass = p.klass;
        rec->target = int(i % targets.size());
        rec->scheduled_s = closed ? now() : p.at_s;
        rec->target_input = p.input_len;
        rec->target_output = p.output_len;
        sp->rec = rec;
        sp->chat = s.endpoint == "chat";
        sp->t0 = t0;
        if (!counted) {
            std::lock_guard<std::mutex> lk(shared->mu);
            ++shared->sent;
        }
        http::ClientCallbacks cb;
        cb.on_sent = [rec, sp] { rec->sent_s = sp->now(); };
        cb.on_status = [rec](int status) { rec->status = status; };
        cb.on_retry = [rec] { ++rec->retries; };
        cb.on_body = [sp](std::string_view d) { sp->feed(d); };
        cb.on_done = [&, rec, sp](const http::ClientError* e) {
            rec->done_s = sp->now();
            if (rec->sent_s < 0) rec->sent_s = rec->done_s;
            if (e) {
                rec->error_kind = http::client_error_kind_name(e->kind);
                rec->error = e->message;
            } else if (rec->status != 200) {
                rec->error_kind = rec->status >= 500 ? "http_5xx" : "http_4xx";
                json j = json::parse(sp->body, nullptr, false);
                rec->error =
                    fmt::format("HTTP {}: {}", rec->status,
                                j.is_object() && j.contains("error") && j["error"].is_object() &&
                                        j["error"].contains("message")
                                    ? j["error"]["message"].dump()
                                    : sp->body.substr(0, 200));
            } else if (rec->error_kind.empty() && !sp->done_seen) {
                rec->error_kind = "stream";
                rec->error = "the stream ended without data: [DONE]";
            } else if (rec->error_kind.empty() && rec->token_s.empty() &&
                       rec->completion_tokens > 0 && sp->finish_s >= 0) {
                // The only tokens had no printable text yet (a partial UTF-8 sequence): they
                // arrived with the final chunk.
                rec->first_token_s = sp->finish_s;
                rec->token_s.push_back(sp->finish_s);
            } else if (rec->error_kind.empty() && rec->token_s.empty()) {
                rec->error_kind = "stream";
                rec->error = "the stream carried no tokens";
            }
            // The follow-up of a closed loop is counted as sent under the same lock that counts
            // this one finished, so the main thread never sees an idle moment between them.
            size_t follow = SIZE_MAX;
            {
                std::lock_guard<std::mutex> lk(shared->mu);
                ++shared->finished;
                if (!rec->ok()) ++shared->failed;
                if (rec->ok() && rec->first_token_s >= 0) shared->ttfts.push_back(rec->ttft_ms());
                if (closed && !stop_sending.load()) {
                    size_t n = next.fetch_add(1);
                    if (n < limit && (s.duration_s <= 0 || now() < s.duration_s)) {
                        follow = n;
                        ++shared->sent;
                    } else {
                        stop_sending = true;
                    }
                }
            }
            shared->cv.notify_all();
            if (follow != SIZE_MAX) send(follow, true);
        };
        tg->client->start(
            {.method = "POST",
             .path = s.endpoint == "chat" ? "/v1/chat/completions" : "/v1/completions",
             .body = request_body(s, p, tg->model),
             .content_type = "application/json",
             .headers = {}},
            std::move(cb));
    };

    // The server timeline: the first target's gauges once a period, on a thread of its own.
    std::atomic<bool> sampling{opts.sample_every_s > 0 && !targets.empty()};
    std::mutex sample_mu;
    std::condition_variable sample_cv;
    std::thread sampler;
    if (sampling.load()) {
        sampler = std::thread([&] {
            std::unique_lock<std::mutex> lk(sample_mu);
            for (int k = 0; sampling.load(); ++k) {
                lk.unlock();
                ServerSample smp{now(), timeline_gauges(scrape_metrics(*targets[0]))};
                lk.lock();
                res.server.push_back(std::move(smp));
                const auto due =
                    t0 + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(opts.sample_every_s * (k + 1)));
                sample_cv.wait_until(lk, due, [&] { return !sampling.load(); });
            }
        });
    }
    auto stop_sampler = [&] {
        {
            std::lock_guard<std::mutex> lk(sample_mu);
            sampling = false;
        }
        sample_cv.notify_all();
        if (sampler.joinable()) sampler.join();
    };

    double last_progress = -1;
    auto check = [&]() {
        double t = now();
        std::unique_lock<std::mutex> lk(shared->mu);
        int64_t in_flight = shared->sent - shared->finished;
        if (res.aborted.empty()) {
            if (opts.interrupted && opts.interrupted()) res.aborted = "interrupted";
            if (s.stop_error_rate > 0 && shared->finished >= 20 &&
                double(shared->failed) / double(shared->finished) > s.stop_error_rate) {
                res.aborted = fmt::format("error rate {:.1f}% passed the stop bound {:.1f}%",
                                          100.0 * double(shared->failed) / double(shared->finished),
                                          100 * s.stop_error_rate);
            }
            if (s.stop_in_flight > 0 && in_flight > s.stop_in_flight) {
                res.aborted = fmt::format("{} requests in flight passed the stop bound {}",
                                          in_flight, s.stop_in_flight);
            }
            if (!res.aborted.empty()) stop_sending = true;
        }
        if (opts.progress && t - last_progress >= 0.5) {
            last_progress = t;
            std::vector<double> v = shared->ttfts;
            double p99 = NAN;
            if (!v.empty()) {
                std::sort(v.begin(), v.end());
                p99 = percentile_sorted(v, 0.99);
            }
            std::string total =
                closed && s.requests <= 0 ? "" : fmt::format("/{}", closed ? limit : plan.size());
            std::fprintf(stderr,
                         "\r\033[K%s%.0fs  %lld%s sent  %lld done  %lld in flight  %.1f req/s  p99 "
                         "TTFT %s  %lld errors",
                         opts.label.empty() ? "" : (opts.label + "  ").c_str(), t,
                         (long long)shared->sent, total.c_str(), (long long)shared->finished,
                         (long long)in_flight, t > 0 ? double(shared->finished) / t : 0.0,
                         std::isnan(p99) ? "-" : fmt::format("{:.0f} ms", p99).c_str(),
                         (long long)shared->failed);
            std::fflush(stderr);
        }
    };

    if (closed) {
        size_t c = std::min<size_t>(size_t(s.arrival.concurrency), limit);
        for (size_t k = 0; k < c; ++k) send(next.fetch_add(1), false);
        while (true) {
            std::unique_lock<std::mutex> lk(shared->mu);
            shared->cv.wait_for(lk, std::chrono::milliseconds(200));
            bool idle = shared->finished == shared->sent;
            lk.unlock();
            check();
            if (s.duration_s > 0 && now() >= s.duration_s) stop_sending = true;
            if (idle && (stop_sending.load() || next.load() >= limit)) break;
        }
    } else {
        for (size_t i = 0; i < plan.size() && !stop_sending.load(); ++i) {
            auto due = t0 + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(plan[i].at_s));
            while (Clock::now() < due && !stop_sending.load()) {
                std::this_thread::sleep_until(
                    std::min(due, Clock::now() + std::chrono::milliseconds(100)));
                check();
            }
            if (stop_sending.load()) break;
            send(i, false);
        }
        while (true) {
            std::unique_lock<std::mutex> lk(shared->mu);
            if (shared->finished == shared->sent) break;
            shared->cv.wait_for(lk, std::chrono::milliseconds(200));
            lk.unlock();
            check();
        }
    }
    check();
    stop_sampler();
    if (opts.progress) std::fprintf(stderr, "\n");
    res.duration_s = now();
    return res;
}

}  // namespace pagoda::bench
