#pragma once
// n-gram speculative decoding (prompt lookup), vLLM's `--speculative-config` shape:
//   {"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_max": N,
//    "prompt_lookup_min": M}
// A greedy decode proposes up to K tokens by finding the sequence's last n tokens
// (n from N down to M) earlier in its own prompt and output and copying what followed them;
// the decode then computes its last token and the drafts in one forward pass, and keeps
// the drafts up to the first one the model would not have chosen, plus the model's own
// next token. Only samples whose choice is a pure function of the logits row speculate
// (temperature 0, no penalties, no min_tokens, no grammar, n = 1), on dense models (the
// engine decides: engine_step.cpp), so the output is the one plain decoding gives.
//
// Each sample adapts (DraftBackoff): it proposes at most `limit` drafts, doubled while all
// are accepted, cut to the accepted + 1 when some are refused; when all are refused the
// limit drops to 1 and the sample waits 8, 16, 32, then 64 decodes before it proposes again.
// A verify of 1 + k rows costs 1.4 (k = 1) to 1.9 (k = 4) plain steps on the TinyLlama
// shape (bench/micro/verify_bench.cpp): text that does not repeat pays ~0.4 step per miss.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace pagoda::engine {

struct SamplingParams;

struct SpeculativeConfig {
    int num_speculative_tokens = 0;  // K; 0 = off
    int prompt_lookup_max = 5;       // longest n-gram matched
    int prompt_lookup_min = 2;       // shortest n-gram matched

    bool enabled() const { return num_speculative_tokens > 0; }
    Status validate() const;
};

inline constexpr int kMaxSpeculativeTokens = 16;

// Parses the JSON text of --speculative-config ("" = off). Errors name the field and what
// is allowed.
Result<SpeculativeConfig> parse_speculative_config(const std::string& json_text);
std::string to_json(const SpeculativeConfig& c);  // "" when off

// True where the sample's token is a pure function of its logits row.
bool can_speculate(const SamplingParams& p);

// Up to `max_tokens` drafts for a sequence whose tokens are `tokens` (the last one is the
// newest): the tokens that followed the most recent earlier occurrence of its longest
// matching suffix. Appends to `out`; returns how many.
int propose_ngram(std::span<const int32_t> tokens, const SpeculativeConfig& c, int max_tokens,
                  std::vector<int32_t>& out);

// Per-sample draft length and backoff after refused drafts.
struct DraftBackoff {
    int misses = 0;                     // verifies in a row that accepted nothing
    int wait = 0;                       // decodes left before the next proposal
    int limit = kMaxSpeculativeTokens;  // drafts the next proposal may have

    bool ready() const { return wait == 0; }
    void skip() { --wait; }
    void verified(int accepted, int proposed) {
        if (accepted == proposed) {
            limit = std::min(kMaxSpeculativeTokens, 2 * proposed);
        } else {
            limit = accepted + 1;
        }
        if (accepted > 0) {
            misses = 0;
        } else {
            misses = misses < 4 ? misses + 1 : 4;
            wait = 4 << misses;
        }
    }
};

}  // namespace pagoda::engine
