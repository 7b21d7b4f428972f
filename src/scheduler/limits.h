#pragma once
// The request-size rules, each with one owner here, reported from here: the context length
// (prompt plus new tokens within max_model_len), the KV fit (a sequence's blocks within the
// whole pool) and the chunked-prefill rule (with chunking off every prompt must fit one
// step's token budget). The server, the engine and the scheduler call these and pass the
// message on; none restates a rule. Pure functions; thread-safe.

#include <cstdint>
#include <string>

#include "base/result.h"

namespace pagoda::scheduler {

struct RuntimeKnobs;

// How max_tokens was set: given by the client (a total past the context is an error, as
// vLLM answers) or defaulted (capped to what the context leaves).
enum class MaxTokens { kGiven, kCapToContext };

enum class LengthVerdict { kFits, kPromptTooLong, kTotalTooLong };

struct LengthCheck {
    LengthVerdict verdict = LengthVerdict::kFits;
    std::string message;            // empty when it fits
    int64_t capped_max_tokens = 0;  // max_tokens after capping to the context
};

// The context-length rule.
LengthCheck check_context_length(int64_t prompt_tokens, int64_t max_tokens, MaxTokens how,
                                 int max_model_len);

// The KV-fit rule: `total_tokens` needs blocks_for(total) blocks of `block_size`.
Status check_kv_fit(int64_t total_tokens, int block_size, int64_t num_blocks);

// The chunked-prefill rule, for knobs at start and on every change.
Status check_chunked_prefill(const RuntimeKnobs& k, bool enable_chunked_prefill, int max_model_len);

}  // namespace pagoda::scheduler
