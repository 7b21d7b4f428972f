// /admin/*: drain and the runtime knobs. Separate from inference routes so the control plane
// can grow here (versions, rollback) without touching the OpenAI mapping.
#include <fmt/core.h>

#include <algorithm>

#include "base/log.h"
#include "server/api_error.h"
#include "server/openai_server.h"

namespace pagoda::server {

namespace {

json knobs_json(const engine::RuntimeKnobs& k) {
    return {{"max_num_seqs", k.max_num_seqs},
            {"max_num_batched_tokens", k.max_num_batched_tokens},
            {"long_prefill_token_threshold", k.long_prefill_token_threshold},
            {"max_waiting_requests", k.max_waiting_requests},
            {"max_waiting_tokens", k.max_waiting_tokens}};
}

// Applies a partial JSON object onto `k`; a wrong key or type is a 400 and changes nothing.
std::optional<http::Reply> apply_knobs_json(const json& j, engine::RuntimeKnobs& k) {
    for (const auto& [key, v] : j.items()) {
        int64_t* target64 = key == "max_waiting_tokens" ? &k.max_waiting_tokens : nullptr;
        int* target = key == "max_num_seqs"                   ? &k.max_num_seqs
                      : key == "max_num_batched_tokens"       ? &k.max_num_batched_tokens
                      : key == "long_prefill_token_threshold" ? &k.long_prefill_token_threshold
                      : key == "max_waiting_requests"         ? &k.max_waiting_requests
                                                              : nullptr;
        if (target == nullptr && target64 == nullptr) {
            return bad_request(
                fmt::format("unknown knob '{}' (known: max_num_seqs, max_num_batched_tokens, "
                            "long_prefill_token_threshold, max_waiting_requests, "
                            "max_waiting_tokens)",
                            key),
                key);
        }
        if (!v.is_number_integer()) {
            return bad_request(fmt::format("'{}' must be an integer, got {}", key, v.type_name()),
                               key);
        }
        const int64_t x = v.get<int64_t>();
        if (target64 != nullptr) {
            *target64 = x;
        } else {
            *target = int(std::clamp<int64_t>(x, INT32_MIN, INT32_MAX));
        }
    }
    return std::nullopt;
}

}  // namespace

http::Reply OpenAiServer::admin(const http::Request& req) {
    const std::string& p = req.path;
    if (p == "/admin/drain" && req.method == "POST") {
        start_drain();
        log_info("drain_requested via=http remote={} in_flight={}", req.remote, in_flight());
        return reply(json_response(200, json{{"status", "draining"}, {"in_flight", in_flight()}}));
    }
    if (p == "/admin/knobs" && req.method == "GET") {
        return reply(json_response(200, knobs_json(engine_.knobs())));
    }
    if (p == "/admin/knobs" && req.method == "PUT") {
        http::Response err;
        auto j = parse_body(req, err);
        if (!j) return reply(err);
        engine::RuntimeKnobs k = engine_.knobs();
        if (auto bad = apply_knobs_json(*j, k)) return *bad;
        if (Status st = engine_.set_knobs(k); !st.ok()) return bad_request(st.error().message);
        return reply(json_response(200, knobs_json(k)));
    }
    return reply(
        api_error(404, fmt::format("no route for {} {}", req.method, p), "not_found_error"));
}

}  // namespace pagoda::server
