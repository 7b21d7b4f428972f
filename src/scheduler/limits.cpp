// The implementation of scheduler/limits.h (the contract is there).
#include "scheduler/limits.h"

#include "scheduler/scheduler.h"

namespace pagoda::scheduler {

LengthCheck check_context_length(int64_t prompt_tokens, int64_t max_tokens, MaxTokens how,
                                 int max_model_len) {
    LengthCheck c;
    c.capped_max_tokens = max_tokens;
    if (prompt_tokens >= max_model_len) {
        c.verdict = LengthVerdict::kPromptTooLong;
        c.message = fmt::format(
            "This model's maximum context length is {} tokens. However, your prompt has {} "
            "tokens; it must leave room for at least one new token.",
            max_model_len, prompt_tokens);
        return c;
    }
    if (prompt_tokens + max_tokens <= max_model_len) return c;
    if (how == MaxTokens::kCapToContext) {
        c.capped_max_tokens = max_model_len - prompt_tokens;
        return c;
    }
    c.verdict = LengthVerdict::kTotalTooLong;
    c.message = fmt::format(
        "This model's maximum context length is {} tokens. However, you requested {} tokens ({} "
        "in the prompt, {} for the completion).",
        max_model_len, prompt_tokens + max_tokens, prompt_tokens, max_tokens);
    return c;
}

Status check_kv_fit(int64_t total_tokens, int block_size, int64_t num_blocks) {
    const int64_t need = (total_tokens + block_size - 1) / block_size;
    if (need <= num_blocks) return ok_status();
    return make_error(ErrorCode::kOutOfRange,
                      "{} tokens (prompt plus max_tokens) need {} KV blocks of {} but the whole "
                      "cache holds {}; lower max_tokens or raise --kv-cache-memory",
                      total_tokens, need, block_size, num_blocks);
}

Status check_chunked_prefill(const RuntimeKnobs& k, bool enable_chunked_prefill,
                             int max_model_len) {
    if (enable_chunked_prefill || k.max_num_batched_tokens >= max_model_len) return ok_status();
    return make_error(ErrorCode::kInvalidArgument,
                      "with chunked prefill off, max_num_batched_tokens ({}) must be >= "
                      "max_model_len ({}) so every prompt fits in one step",
                      k.max_num_batched_tokens, max_model_len);
}

}  // namespace pagoda::scheduler
