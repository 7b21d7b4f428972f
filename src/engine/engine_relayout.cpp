// Engine::apply_relayout: a new KV pool with another block size, dtype or size, between two
// steps. With the same dtype the running sequences keep their computed tokens: their K/V
// is copied slot by slot into the new layout (Scheduler::move_all); a sequence that does
// not fit, and every one when the dtype changes, is preempted for recompute (the
// scheduler's preemption path). Either way greedy outputs stay identical (they do not
// depend on the block size, and a copy is bit for bit). Engine thread only.
#include "base/log.h"
#include "engine/engine.h"

namespace pagoda::engine {

Result<RelayoutReport> Engine::apply_relayout(const kvcache::KvCacheConfig& kv) {
    const auto t0 = Clock::now();
    const auto& mc = model_->config();
    auto refuse = [&](const Error& e) -> Result<RelayoutReport> {
        log_warn("kv_relayout_refused block_size={} error=\"{}\"", kv.block_size, e.message);
        return Error{
            e.code, fmt::format("KV re-layout refused, the old pool keeps serving: {}", e.message)};
    };
    // Allocated while the old pool still exists.
    auto pool = kvcache::KvPool::create(kv, mc.num_layers, mc.num_kv_heads, mc.head_dim);
    if (!pool.ok()) return refuse(pool.error());
    if (Status st = sched_->check_fits(pool->block_size(), pool->num_blocks()); !st.ok()) {
        return refuse(st.error());
    }
    auto new_pool = std::make_unique<kvcache::KvPool>(std::move(pool).value());
    auto new_blocks = std::make_unique<kvcache::BlockManager>(
        new_pool->num_blocks(), new_pool->block_size(), cfg_.enable_prefix_caching);
    scheduler::Scheduler::Evicted evicted;
    scheduler::Scheduler::Moved moved;
    if (new_pool->dtype() == pool_->dtype()) {
        moved = sched_->move_all(
            *new_blocks, [&](const kvcache::BlockTable& from, const kvcache::BlockTable& to,
                             int64_t n) { new_pool->copy_tokens_from(*pool_, from, to, n); });
        evicted = moved.evicted;
    } else {
        evicted = sched_->preempt_all();
        sched_->rebind(*new_blocks);
    }
    blocks_ = std::move(new_blocks);
    pool_ = std::move(new_pool);  // the old pool is freed here
    totals_.relayout_evictions += evicted.sequences;
    totals_.blocks = blocks_->stats();
    publish_now();  // before relayout() returns, readers see the new layout
    RelayoutReport rep;
    rep.block_size = pool_->block_size();
    rep.num_blocks = pool_->num_blocks();
    rep.sequences = evicted.sequences;
    rep.recompute_tokens = evicted.recompute_tokens;
    rep.moved_sequences = moved.sequences;
    rep.copied_tokens = moved.tokens;
    rep.pause_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    log_info(
        "kv_relayout block_size={} kv_blocks={} kv_dtype={} kv_mib={:.1f} moved={} "
        "copied_tokens={} preempted={} recompute_tokens={} pause_ms={:.2f}",
        rep.block_size, rep.num_blocks, kvcache::kv_dtype_name(pool_->dtype()),
        double(pool_->total_bytes()) / (1 << 20), rep.moved_sequences, rep.copied_tokens,
        rep.sequences, rep.recompute_tokens, rep.pause_seconds * 1e3);
    return rep;
}

}  // namespace pagoda::engine
