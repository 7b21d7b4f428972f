// Speculative decoding in the step (speculation.h): propose before the plan, verify after
// the forward, emit the verified tokens. Engine thread only.
#include <algorithm>

#include "base/check.h"
#include "engine/engine.h"

namespace pagoda::engine {

void Engine::propose_drafts() {
    const int64_t max_len = cfg_.sched.max_model_len;
    for (scheduler::Sequence* s : sched_->running()) {
        const int64_t size = int64_t(s->tokens.size());
        if (s->num_draft != 0 || size - s->num_computed != 1 ||
            s->num_computed < s->num_prompt_tokens) {
            continue;
        }
        auto it = by_seq_.find(s->id);
        if (it == by_seq_.end() || !it->second.req->speculate) continue;
        LiveRequest& r = *it->second.req;
        if (!r.backoff.ready()) {
            r.backoff.skip();
            continue;
        }
        // Drafts plus the model's own next token stay within max_tokens, and the accepted
        // ones never reach the context length before plain decoding would.
        const int64_t room = std::min(s->max_total_tokens - size - 1, max_len - size - 2);
        const int k = int(
            std::min<int64_t>(std::min(cfg_.spec.num_speculative_tokens, r.backoff.limit), room));
        drafts_.clear();
        if (k > 0 && propose_ngram(s->tokens, cfg_.spec, k, drafts_) > 0) {
            sched_->propose(s->id, drafts_);
        }
    }
}

void Engine::verify_drafts(scheduler::BatchPlan& plan) {
    verified_.clear();
    if (!cfg_.spec.enabled()) return;
    const size_t vocab = size_t(model_->config().vocab_size);
    size_t row = 0;
    for (scheduler::ScheduledSeq& x : plan.seqs) {
        if (!x.sample) continue;
        const size_t first = row;
        row += size_t(1 + x.num_draft);
        const scheduler::Sequence* s = sched_->get(x.id);
        if (x.num_draft == 0) {  // the budget left no room for its drafts: a plain decode
            if (x.decode && s != nullptr && s->num_draft > 0) sched_->settle_drafts(x, 0);
            continue;
        }
        auto it = by_seq_.find(x.id);
        int32_t accepted = 0;
        if (s != nullptr && it != by_seq_.end()) {
            LiveRequest& r = *it->second.req;
            Sampler& sampler = *r.samples[size_t(it->second.sample)].sampler;
            const std::span<const int32_t> prompt(s->tokens.data(), size_t(s->num_prompt_tokens));
            std::vector<int32_t>& tokens = verified_[x.id];
            // Row i predicts the token after draft i (row 0: after the last real token).
            for (int i = 0; i <= x.num_draft; ++i) {
                const float* logits = logits_.data() + (first + size_t(i)) * vocab;
                const int32_t t = sampler.sample({logits, vocab}, prompt, r.ends);
                tokens.push_back(t);
                if (i == x.num_draft || t != s->tokens[size_t(x.pos_start + 1 + i)]) break;
                ++accepted;
            }
            r.backoff.verified(accepted, x.num_draft);
        }
        ++totals_.spec_drafts;
        totals_.spec_draft_tokens += x.num_draft;
        totals_.spec_accepted_tokens += accepted;
        sched_->settle_drafts(x, accepted);
    }
}

// The accepted drafts (already among the sequence's tokens) and the model's next token, in
// order, each with the logits row it came from.
void Engine::push_verified(const scheduler::ScheduledSeq& x, LiveRequest& r, int sample,
                           const float* logits, std::vector<SampledToken>& out) {
    auto v = verified_.find(x.id);
    PAGODA_CHECK(v != verified_.end()) << "sequence " << x.id << " has drafts but no verify";
    const size_t vocab = size_t(model_->config().vocab_size);
    const std::vector<int32_t>& tokens = v->second;
    for (size_t i = 0; i < tokens.size(); ++i) {
        out.push_back({.req = &r,
                       .sample = sample,
                       .token = tokens[i],
                       .logits = logits + i * vocab,
                       .appended = i + 1 < tokens.size()});
    }
}

}  // namespace pagoda::engine
