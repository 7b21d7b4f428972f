// Targets: connecting to a server, its token counters (/tokenize dialects) and its /metrics
// scrapes (the run's server timeline reads them).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "bench/runner.h"

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

// The server's busy fraction between two scrapes: modelled GPU time (sim), else forward
// time of the compute pool, over the run's wall time. NaN when the server has neither.
double busy_ratio(const std::map<std::string, double>& before,
                  const std::map<std::string, double>& after, double seconds) {
    for (const char* name :
         {"pagoda_sim_busy_seconds_total", "pagoda_compute_busy_seconds_total"}) {
        double a = 0, b = 0;
        bool found = false;
        for (const auto& [k, v] : after) {
            if (k.rfind(name, 0) != 0) continue;
            found = true;
            a += v;
            auto it = before.find(k);
            b += it == before.end() ? 0 : it->second;
        }
        if (found && seconds > 0) return (a - b) / seconds;
    }
    return std::numeric_limits<double>::quiet_NaN();
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

}  // namespace pagoda::bench
