// n-gram speculation: the config, who may speculate, and prompt lookup (the contract is in
// engine/speculation.h).
#include "engine/speculation.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "engine/sampler.h"

namespace pagoda::engine {

Status SpeculativeConfig::validate() const {
    if (num_speculative_tokens < 0 || num_speculative_tokens > kMaxSpeculativeTokens) {
        return make_error(ErrorCode::kInvalidArgument,
                          "speculative config: 'num_speculative_tokens' is {} (allowed: 1 to {})",
                          num_speculative_tokens, kMaxSpeculativeTokens);
    }
    if (prompt_lookup_min < 1 || prompt_lookup_max < prompt_lookup_min || prompt_lookup_max > 64) {
        return make_error(ErrorCode::kInvalidArgument,
                          "speculative config: 'prompt_lookup_min' {} and 'prompt_lookup_max' {} "
                          "(allowed: 1 <= min <= max <= 64)",
                          prompt_lookup_min, prompt_lookup_max);
    }
    return ok_status();
}

namespace {
Result<int> int_field(const nlohmann::json& j, const char* name, int fallback) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_number_integer()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "speculative config: '{}' must be an integer, got {}", name, it->dump());
    }
    return it->get<int>();
}
}  // namespace

Result<SpeculativeConfig> parse_speculative_config(const std::string& json_text) {
    SpeculativeConfig c;
    if (json_text.empty()) return c;
    const auto j = nlohmann::json::parse(json_text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "speculative config: not a JSON object: {} (example: "
                          "'{{\"method\":\"ngram\",\"num_speculative_tokens\":4}}')",
                          json_text);
    }
    static constexpr const char* kKnown[] = {"method", "num_speculative_tokens",
                                             "prompt_lookup_max", "prompt_lookup_min"};
    for (const auto& [key, value] : j.items()) {
        if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown)) {
            return make_error(ErrorCode::kInvalidArgument,
                              "speculative config: unknown field '{}' (known: method, "
                              "num_speculative_tokens, prompt_lookup_max, prompt_lookup_min)",
                              key);
        }
    }
    const auto m = j.find("method");
    if (m == j.end() || !m->is_string() || (*m != "ngram" && *m != "[ngram]")) {
        return make_error(ErrorCode::kInvalidArgument,
                          "speculative config: 'method' is {} (supported: \"ngram\", prompt "
                          "lookup; draft models, EAGLE and MTP are not)",
                          m == j.end() ? "missing" : m->dump());
    }
    if (!j.contains("num_speculative_tokens")) {
        return make_error(ErrorCode::kInvalidArgument,
                          "speculative config: 'num_speculative_tokens' is missing (1 to {})",
                          kMaxSpeculativeTokens);
    }
    PAGODA_ASSIGN_OR_RETURN(c.num_speculative_tokens, int_field(j, "num_speculative_tokens", 0));
    if (c.num_speculative_tokens < 1) {
        return make_error(ErrorCode::kInvalidArgument,
                          "speculative config: 'num_speculative_tokens' is {} (allowed: 1 to {})",
                          c.num_speculative_tokens, kMaxSpeculativeTokens);
    }
    const bool has_max = j.contains("prompt_lookup_max");
    PAGODA_ASSIGN_OR_RETURN(c.prompt_lookup_max, int_field(j, "prompt_lookup_max", 5));
    PAGODA_ASSIGN_OR_RETURN(
        c.prompt_lookup_min,
        int_field(j, "prompt_lookup_min", std::min(has_max ? c.prompt_lookup_max : 2, 2)));
    PAGODA_TRY(c.validate());
    return c;
}

std::string to_json(const SpeculativeConfig& c) {
    if (!c.enabled()) return "";
    return nlohmann::json{{"method", "ngram"},
                          {"num_speculative_tokens", c.num_speculative_tokens},
                          {"prompt_lookup_max", c.prompt_lookup_max},
                          {"prompt_lookup_min", c.prompt_lookup_min}}
        .dump();
}

bool can_speculate(const SamplingParams& p) {
    return p.temperature == 0.0f && p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f &&
           p.frequency_penalty == 0.0f && p.min_tokens == 0 && p.n == 1 && !p.constraint;
}

int propose_ngram(std::span<const int32_t> tokens, const SpeculativeConfig& c, int max_tokens,
                  std::vector<int32_t>& out) {
    const int64_t len = int64_t(tokens.size());
    if (max_tokens <= 0) return 0;
    for (int n = std::min<int64_t>(c.prompt_lookup_max, len - 1); n >= c.prompt_lookup_min; --n) {
        const std::span<const int32_t> suffix = tokens.subspan(size_t(len - n));
        // The most recent earlier occurrence: starts at i < len - n, followed by a token.
        for (int64_t i = len - n - 1; i >= 0; --i) {
            if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
            const int64_t from = i + n;
            const int64_t k = std::min<int64_t>(max_tokens, len - from);
            out.insert(out.end(), tokens.begin() + from, tokens.begin() + from + k);
            return int(k);
        }
    }
    return 0;
}

}  // namespace pagoda::engine
