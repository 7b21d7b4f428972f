// The engine's warmth between requests (the warm levels of control/warm_policy): the idle
// spin that keeps the compute pool awake, and the warm passes that keep what a forward pass
// touches warm. Engine thread only.
#include <time.h>

#include <algorithm>

#include "base/log.h"
#include "engine/engine.h"
#include "kernels/cpu/ops.h"

namespace pagoda::engine {

namespace {
double process_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + double(t.tv_nsec) / 1e9;
}

// A warm pass runs this many tokens (a short prefill: the kernels a request's first step
// takes), fewer when the block is smaller, so it fills one block and no full block ever
// reaches the prefix cache's counters.
constexpr int kWarmPassTokens = 8;
// The sequence a warm pass borrows its block under; requests count up from 1.
constexpr int64_t kWarmPassSeq = -1;
}  // namespace

void Engine::spin_while_idle() {
    if (idle_spin_us_.load() <= 0 || model_->simulated()) return;
    const uint64_t seen = intake_->signals.load(std::memory_order_acquire);
    {
        std::lock_guard<std::mutex> lock(intake_->mu);  // work that came before `seen`
        if (intake_->stop || !intake_->pending.empty() || !intake_->cancels.empty() ||
            !intake_->knobs.empty() || intake_->relayout) {
            return;
        }
    }
    const auto start = Clock::now();
    const auto new_work = [&] { return intake_->signals.load(std::memory_order_acquire) != seen; };
    const auto over = [&](Clock::time_point now) {
        return now - start >= std::chrono::microseconds(idle_spin_us_.load());
    };
    const auto pass_due = [&](Clock::time_point last, Clock::time_point now) {
        const int64_t ms = warm_pass_ms_.load();
        return ms > 0 && now - last >= std::chrono::milliseconds(ms);
    };
    // Spin in stretches of at most a second (so the counters move during a long spin),
    // with a warm pass whenever one is due.
    Clock::time_point last_pass = start;
    for (;;) {
        double cpu = 0;
        const auto stretch = Clock::now();
        double wall = kernels::cpu::spin_pool(
            [&] {
                const auto now = Clock::now();
                heartbeat_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
                return new_work() || over(now) || pass_due(last_pass, now) ||
                       now - stretch >= std::chrono::seconds(1);
            },
            &cpu);
        const bool done = new_work() || over(Clock::now());
        if (!done && pass_due(last_pass, Clock::now())) {
            const auto t0 = Clock::now();
            warm_pass(seen, &cpu);
            last_pass = Clock::now();
            wall += std::chrono::duration<double>(last_pass - t0).count();
        }
        spin_s_.store(spin_s_.load() + wall);
        spin_cpu_s_.store(spin_cpu_s_.load() + cpu);
        if (done) break;
    }
}

void Engine::warm_pass(uint64_t seen_signals, double* cpu_s) {
    const int T = std::clamp(blocks_->block_size() - 1, 1, kWarmPassTokens);
    const kvcache::SeqId id{kWarmPassSeq};
    if (blocks_->has(id) || blocks_->num_available() < blocks_->blocks_for(T)) return;
    const double c0 = process_cpu_seconds();
    model::ForwardBatch b;
    b.token_ids.assign(size_t(T), 0);
    blocks_->allocate(id, b.token_ids, 0);
    b.seqs.push_back({0, T, 0, blocks_->table(id)});
    b.logits_rows = {T - 1};
    b.interrupt = [&] {
        return intake_->signals.load(std::memory_order_acquire) != seen_signals ||
               idle_spin_us_.load() <= 0 || warm_pass_ms_.load() <= 0;
    };
    // At normal priority (at idle priority a busy host starves a pass mid-layer for
    // seconds, and a request arriving then would wait for it): a request waits at most for
    // the layer in flight.
    const Status st = model_->forward(b, kvcache::KvView(*pool_), logits_);
    blocks_->free(id);
    heartbeat_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    *cpu_s += process_cpu_seconds() - c0;
    if (!st.ok()) {
        if (st.error().code != ErrorCode::kConflict) {  // not an interruption: stop trying
            log_warn("warm_pass_failed error=\"{}\" (warm passes off)", st.error().message);
            warm_pass_ms_.store(0);
        }
        warm_passes_interrupted_.fetch_add(1);
        return;
    }
    warm_passes_.fetch_add(1);
}

}  // namespace pagoda::engine
