// Grammar-constrained outputs (structured outputs, tool calls): a matcher per sample, the
// token mask applied before sampling, and the grammar advanced as tokens are emitted. The
// state lives with the sample, not with the KV cache, so a preemption (recompute) or a KV
// re-layout leaves it where it was; a mask depends only on the sample's own position, so
// outputs do not depend on what else is in the batch. Engine thread only.
#include <algorithm>

#include "base/check.h"
#include "base/log.h"
#include "engine/engine.h"

namespace pagoda::engine {

void Engine::start_matchers(LiveRequest& r) {
    const auto& con = r.req.sampling.constraint;
    if (!con) return;
    if (!trie_) {
        const tokenizer::Tokenizer& tok = model_->tokenizer();
        token_bytes_.resize(size_t(tok.vocab().size()));
        for (size_t t = 0; t < token_bytes_.size(); ++t)
            token_bytes_[t] = tok.token_bytes(int32_t(t));
        trie_ = std::make_unique<grammar::TokenTrie>(token_bytes_);
    }
    ++totals_.constrained_requests;
    const auto& ids = r.req.prompt_ids;
    const size_t resumed = std::min(size_t(std::max(r.req.resumed_tokens, 0)), ids.size());
    for (Sample& c : r.samples) {
        c.matcher = std::make_unique<grammar::Matcher>(con->grammar);
        // A resumed stream: the output so far, replayed (the server checked that it follows
        // the grammar, so a refusal here is not reachable).
        for (size_t i = ids.size() - resumed; i < ids.size(); ++i) {
            const int32_t t = ids[i];
            if (t < 0 || size_t(t) >= token_bytes_.size() ||
                !c.matcher->accept(token_bytes_[size_t(t)])) {
                log_error("grammar_replay request={} token={} error=\"outside the grammar\"", r.id,
                          t);
                break;
            }
        }
    }
}

std::span<const uint8_t> Engine::allowed_tokens(const LiveRequest& r, const Sample& c) {
    if (!c.matcher) return {};
    const auto t0 = Clock::now();
    const SamplingParams& sp = r.req.sampling;
    c.matcher->fill_mask(*trie_, mask_, sp.constraint->masks.get());
    // End tokens (EOS/EOT unless ignore_eos, and stop_token_ids) only where the grammar
    // accepts; never before min_tokens.
    const uint8_t end_ok = c.matcher->can_end() && c.generated >= sp.min_tokens ? 1 : 0;
    for (int32_t e : r.ends) {
        if (e >= 0 && size_t(e) < mask_.size()) mask_[size_t(e)] = end_ok;
    }
    step_mask_s_ += std::chrono::duration<double>(Clock::now() - t0).count();
    return mask_;
}

bool Engine::advance_grammar(LiveRequest& r, Sample& c, int32_t tok) {
    if (!c.matcher) return true;
    if (tok >= 0 && size_t(tok) < token_bytes_.size() &&
        c.matcher->accept(token_bytes_[size_t(tok)]))
        return true;
    // Not reachable while masks are right: a sampled token is always an allowed one.
    event_for(r, c).set_error("internal error: a token outside the grammar was sampled");
    finish_sample(r, c, FinishReason::kError, "");
    return false;
}

}  // namespace pagoda::engine
