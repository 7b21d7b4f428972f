#include "engine/generator.h"

namespace pagoda::engine {

using Clock = std::chrono::steady_clock;

Result<Generator> Generator::create(model::Model& m, const kvcache::KvCacheConfig& kv) {
    Generator g;
    g.model_ = &m;
    const auto& c = m.config();
    PAGODA_ASSIGN_OR_RETURN(kvcache::KvPool pool, kvcache::KvPool::create(kv, c.num_layers, c.num_kv_heads, c.head_dim));
    g.pool_ = std::make_unique<kvcache::KvPool>(std::move(pool));
    g.alloc_ = std::make_unique<kvcache::BlockAllocator>(g.pool_->num_blocks());
    return g;
}

Status Generator::ensure_blocks(int num_tokens) {
    const int bs = pool_->block_size();
    while (int64_t(table_.size()) * bs < num_tokens) {
        const int32_t b = alloc_->allocate();
        if (b == kvcache::BlockAllocator::kNoBlock) {
            return make_error(ErrorCode::kOutOfRange,
                              "KV cache full: {} tokens need {} blocks of {} but the cache holds {}; raise "
                              "--kv-cache-memory",
                              num_tokens, (num_tokens + bs - 1) / bs, bs, pool_->num_blocks());
        }
        table_.push_back(b);
    }
    return ok_status();
}

Result<GenerateResult> Generator::generate(const std::vector<int32_t>& prompt, const GenerateParams& p,
                                           const std::function<void(int32_t)>& on_token) {
    PAGODA_TRY(p.sampling.validate());
    const auto& cfg = model_->config();
    if (prompt.empty()) return make_error(ErrorCode::kInvalidArgument, "the prompt is empty (no tokens)");
    if (int64_t(prompt.size()) + p.max_new_tokens > cfg.context_length) {
        return make_error(ErrorCode::kOutOfRange,
                          "prompt of {} tokens plus {} new tokens exceeds the model's context length of {}",
                          prompt.size(), p.max_new_tokens, cfg.context_length);
    }
    for (int32_t b : table_) alloc_->free(b);
    table_.clear();

    GenerateResult r;
    r.prompt_ids = prompt;
    Sampler sampler(p.sampling);
    const kvcache::KvView view(*pool_);
    std::vector<float> logits;
    model::ForwardBatch batch;

    // Prefill in chunks; logits only for the last prompt token.
    const auto t0 = Clock::now();
    int pos = 0;
    const int n = int(prompt.size());
    while (pos < n) {
        const int chunk = std::min(p.prefill_chunk, n - pos);
        PAGODA_TRY(ensure_blocks(pos + chunk));
        batch.token_ids.assign(prompt.begin() + pos, prompt.begin() + pos + chunk);
        batch.seqs = {{0, chunk, pos, table_}};
        batch.logits_rows.clear();
        if (pos + chunk == n) batch.logits_rows.push_back(chunk - 1);
        PAGODA_TRY(model_->forward(batch, view, logits));
        pos += chunk;
    }
    const auto t1 = Clock::now();
    r.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();

    r.finish_reason = "length";
    const auto& vocab = model_->tokenizer().vocab();
    for (int i = 0; i < p.max_new_tokens; ++i) {
        const int32_t tok = sampler.sample(std::span<const float>(logits.data(), size_t(cfg.vocab_size)));
        if (p.stop_at_eos == GenerateParams::StopAtEos::kYes && vocab.is_end_of_generation(tok)) {
            r.finish_reason = "stop";
            break;
        }
        r.output_ids.push_back(tok);
        if (on_token) on_token(tok);
        if (i + 1 == p.max_new_tokens) break;
        PAGODA_TRY(ensure_blocks(pos + 1));
        batch.token_ids = {tok};
        batch.seqs = {{0, 1, pos, table_}};
        batch.logits_rows = {0};
        PAGODA_TRY(model_->forward(batch, view, logits));
        ++pos;
    }
    r.decode_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
    return r;
}

}  // namespace pagoda::engine
