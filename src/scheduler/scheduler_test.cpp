#include "scheduler/scheduler.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <numeric>
#include <set>

#include "base/log.h"

namespace pagoda::scheduler {
namespace {

constexpr SeqId S(int64_t v) { return SeqId{v}; }

std::unique_ptr<Sequence> make_seq(SeqId id, int prompt, int max_new, int priority = 0,
                                   int first_token = 1) {
    auto s = std::make_unique<Sequence>();
    s->id = id;
    s->tokens.resize(size_t(prompt));
    std::iota(s->tokens.begin(), s->tokens.end(), first_token);
    s->max_total_tokens = prompt + max_new;
    s->priority = priority;
    return s;
}

SchedulerConfig config(int max_seqs, int max_tokens) {
    SchedulerConfig c;
    c.knobs.max_num_seqs = max_seqs;
    c.knobs.max_num_batched_tokens = max_tokens;
    c.watermark = 0.0;
    c.max_model_len = 4096;
    return c;
}

// Runs one step as the engine would: every sampled sequence gets a token.
BatchPlan step(Scheduler& s, int32_t token = 7) {
    BatchPlan p = s.schedule(Clock::now());
    s.on_step_done(p);
    for (const auto& x : p.seqs) {
        if (x.sample) s.append_token(x.id, token);
    }
    return p;
}

TEST(Scheduler, DecodesFirstThenChunkedPrefill) {
    kvcache::BlockManager bm(64, 16, false);
    Scheduler s(config(8, 32), bm);
    ASSERT_TRUE(s.add(make_seq(S(1), 10, 10)).ok());
    auto p = step(s);
    ASSERT_EQ(p.seqs.size(), 1u);
    EXPECT_EQ(p.seqs[0].num_tokens, 10);
    EXPECT_TRUE(p.seqs[0].sample);
    ASSERT_TRUE(s.add(make_seq(S(2), 100, 10)).ok());
    p = step(s);
    ASSERT_EQ(p.seqs.size(), 2u);
    EXPECT_EQ(p.seqs[0].id, S(1));  // the decode first
    EXPECT_EQ(p.seqs[0].num_tokens, 1);
    EXPECT_EQ(p.seqs[1].id, S(2));
    EXPECT_EQ(p.seqs[1].num_tokens, 31);  // chunk = what the budget leaves
    EXPECT_FALSE(p.seqs[1].sample);
    EXPECT_EQ(p.num_batched_tokens, 32);
    EXPECT_EQ(p.num_decode_seqs, 1);
    EXPECT_EQ(p.num_prefill_tokens, 31);
    p = step(s);
    EXPECT_EQ(p.seqs[1].pos_start, 31);
}

TEST(Scheduler, LongPrefillThresholdKeepsShortRequestsFlowing) {
    kvcache::BlockManager bm(256, 16, false);
    auto c = config(8, 64);
    c.knobs.long_prefill_token_threshold = 16;
    Scheduler s(c, bm);
    ASSERT_TRUE(s.add(make_seq(S(1), 1000, 4)).ok());
    ASSERT_TRUE(s.add(make_seq(S(2), 8, 4)).ok());
    auto p = step(s);
    ASSERT_EQ(p.seqs.size(), 2u);
    EXPECT_EQ(p.seqs[0].num_tokens, 16);
    EXPECT_EQ(p.seqs[1].num_tokens, 8);
    EXPECT_TRUE(p.seqs[1].sample);
}

TEST(Scheduler, WaitReasonsAndPriority) {
    kvcache::BlockManager bm(4, 16, false);  // 64 token slots
    Scheduler s(config(8, 512), bm);
    ASSERT_TRUE(s.add(make_seq(S(1), 60, 4)).ok());
    step(s);
    ASSERT_TRUE(s.add(make_seq(S(2), 30, 4, /*priority=*/5)).ok());
    ASSERT_TRUE(s.add(make_seq(S(3), 30, 4, /*priority=*/0)).ok());
    step(s);
    // 3 (higher priority) is at the head and lacks blocks; 2 waits behind it for priority.
    ASSERT_EQ(s.waiting().size(), 2u);
    EXPECT_EQ(s.waiting()[0]->id, S(3));
    EXPECT_EQ(s.waiting()[0]->reason, WaitReason::kNoFreeBlocks);
    EXPECT_EQ(s.waiting()[1]->reason, WaitReason::kPriority);
    auto c = s.counts();
    EXPECT_EQ(c.by_reason[int(WaitReason::kNoFreeBlocks)], 1);
    EXPECT_EQ(c.by_reason[int(WaitReason::kPriority)], 1);
    s.finish(S(1));
    auto p = step(s);
    EXPECT_EQ(p.admitted.front(), S(3));
}

TEST(Scheduler, SeqCapAndTokenBudgetReasons) {
    kvcache::BlockManager bm(64, 16, false);
    Scheduler s(config(1, 512), bm);
    ASSERT_TRUE(s.add(make_seq(S(1), 10, 4)).ok());
    ASSERT_TRUE(s.add(make_seq(S(2), 10, 4)).ok());
    step(s);
    EXPECT_EQ(s.waiting()[0]->reason, WaitReason::kSeqCap);
    RuntimeKnobs k = s.knobs();
    k.max_num_seqs = 2;
    k.max_num_batched_tokens = 1;
    ASSERT_TRUE(s.set_knobs(k).ok());
    step(s);
    EXPECT_EQ(s.waiting()[0]->reason, WaitReason::kTokenBudget);
    k.max_num_seqs = 0;
    EXPECT_FALSE(s.set_knobs(k).ok());
    EXPECT_EQ(s.knobs().max_num_seqs, 2);  // a bad value changes nothing
}

TEST(Scheduler, BoundedQueueRejectsWithResourceExhausted) {
    kvcache::BlockManager bm(64, 16, false);
    auto c = config(8, 64);
    c.knobs.max_waiting_requests = 2;
    Scheduler s(c, bm);
    ASSERT_TRUE(s.add(make_seq(S(1), 10, 4)).ok());
    ASSERT_TRUE(s.add(make_seq(S(2), 10, 4)).ok());
    auto st = s.add(make_seq(S(3), 10, 4));
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::kResourceExhausted);
    // Never-fitting requests are refused, not queued forever.
    auto big = s.add(make_seq(S(4), 2000, 10));
    ASSERT_FALSE(big.ok());
    EXPECT_EQ(big.error().code, ErrorCode::kOutOfRange);
    auto ctx = s.add(make_seq(S(5), 4000, 200));
    ASSERT_FALSE(ctx.ok());
    EXPECT_NE(ctx.error().message.find("maximum context length"), std::string::npos);
}

TEST(Scheduler, DeadlineTimesOutQueuedRequest) {
    kvcache::BlockManager bm(4, 16, false);
    Scheduler s(config(8, 512), bm);
    ASSERT_TRUE(s.add(make_seq(S(1), 60, 4)).ok());
    auto late = make_seq(S(2), 30, 4);
    late->deadline = Clock::now() - std::chrono::milliseconds(1);
    ASSERT_TRUE(s.add(std::move(late)).ok());
    auto p = step(s);
    ASSERT_EQ(p.timed_out.size(), 1u);
    EXPECT_EQ(p.timed_out[0], S(2));
    EXPECT_FALSE(s.has(S(2)));
}

TEST(Scheduler, PreemptsLatestArrivalWhenBlocksRunOut) {
    kvcache::BlockManager bm(4, 4, true);  // 16 slots
    Scheduler s(config(8, 64), bm);
    ASSERT_TRUE(s.add(make_seq(S(1), 7, 8)).ok());
    ASSERT_TRUE(s.add(make_seq(S(2), 7, 8, 0, 50)).ok());
    step(s);           // both admitted: 2 blocks each
    step(s);           // 8 tokens each, still 2 blocks
    auto p = step(s);  // both need a third block: 2 (latest) is preempted
    ASSERT_EQ(p.preempted.size(), 1u);
    EXPECT_EQ(p.preempted[0].id, S(2));
    EXPECT_NE(p.preempted[0].reason.find("KV blocks"), std::string::npos);
    EXPECT_EQ(s.get(S(2))->num_preemptions, 1);
    EXPECT_EQ(s.get(S(2))->state, Sequence::State::kWaiting);
    EXPECT_EQ(s.total_preemptions(), 1);
    ASSERT_EQ(p.seqs.size(), 1u);
    EXPECT_EQ(p.seqs[0].id, S(1));
}

TEST(Scheduler, ForkSharesBlocks) {
    kvcache::BlockManager bm(16, 4, false);
    Scheduler s(config(8, 64), bm);
    ASSERT_TRUE(s.add(make_seq(S(1), 6, 4)).ok());
    auto p = s.schedule(Clock::now());
    s.on_step_done(p);
    s.fork(S(1), S(2));
    s.append_token(S(1), 9);
    s.append_token(S(2), 10);
    EXPECT_EQ(bm.table(S(1)), bm.table(S(2)));
    p = s.schedule(Clock::now());
    ASSERT_EQ(p.seqs.size(), 2u);
    ASSERT_EQ(p.copies.size(), 1u);  // the second (shared, partial) block is copied for one of them
    EXPECT_EQ(bm.table(S(1))[0], bm.table(S(2))[0]);
    EXPECT_NE(bm.table(S(1))[1], bm.table(S(2))[1]);
}

// Random workloads through a simulated engine: budgets hold every step, blocks are
// conserved, and every request ends exactly once.
RC_GTEST_PROP(SchedulerProperty, BudgetsConservationExactlyOnce, ()) {
    set_log_level(LogLevel::kWarn);  // preemptions are logged at info
    const int block_size = *rc::gen::element(1, 4, 16);
    const int64_t num_blocks = *rc::gen::inRange(4, 64);
    const bool caching = *rc::gen::arbitrary<bool>();
    kvcache::BlockManager bm(num_blocks, block_size, caching);
    SchedulerConfig cfg;
    cfg.knobs.max_num_seqs = *rc::gen::inRange(1, 8);
    cfg.knobs.max_num_batched_tokens = *rc::gen::inRange(1, 64);
    cfg.knobs.long_prefill_token_threshold = *rc::gen::inRange(0, 16);
    cfg.knobs.max_waiting_requests = *rc::gen::inRange(1, 20);
    cfg.watermark = *rc::gen::element(0.0, 0.1);
    cfg.max_model_len = 256;
    Scheduler s(cfg, bm);

    std::map<SeqId, int> ended;    // id -> times it ended
    std::map<SeqId, int> max_new;  // accepted requests
    std::map<SeqId, int> generated;
    SeqId next{1};
    // As the engine after a forward: each sampled sequence ends at its length or gets a token.
    auto sampled = [&](const BatchPlan& p, int32_t token) {
        for (const auto& x : p.seqs) {
            if (!x.sample) continue;
            if (++generated[x.id] >= max_new[x.id]) {
                s.finish(x.id);
                ++ended[x.id];
            } else {
                s.append_token(x.id, token);
            }
        }
    };
    const int steps = *rc::gen::inRange(1, 120);
    for (int t = 0; t < steps; ++t) {
        const int arrivals = *rc::gen::inRange(0, 3);
        for (int a = 0; a < arrivals; ++a) {
            const int prompt = *rc::gen::inRange(1, 40);
            const int mx = *rc::gen::inRange(1, 12);
            auto seq = make_seq(next, prompt, mx, *rc::gen::inRange(0, 3), *rc::gen::inRange(0, 3));
            if (s.add(std::move(seq)).ok()) {
                max_new[next] = mx;
            } else {
                ++ended[next];  // rejected
            }
            ++next;
        }
        if (*rc::gen::inRange(0, 10) == 0 && !max_new.empty()) {  // cancel one
            auto it = max_new.begin();
            std::advance(it, *rc::gen::inRange<size_t>(0, max_new.size()));
            if (s.has(it->first) && ended[it->first] == 0) {
                s.finish(it->first);
                ++ended[it->first];
            }
        }
        if (*rc::gen::inRange(0, 20) == 0) {  // knobs change between steps
            RuntimeKnobs k = s.knobs();
            k.max_num_seqs = *rc::gen::inRange(1, 8);
            k.max_num_batched_tokens = *rc::gen::inRange(1, 64);
            RC_ASSERT(s.set_knobs(k).ok());
        }
        BatchPlan p = s.schedule(Clock::now());
        RC_ASSERT(p.num_batched_tokens <= s.knobs().max_num_batched_tokens);
        RC_ASSERT(p.seqs.size() <= size_t(s.knobs().max_num_seqs));
        int32_t sum = 0;
        std::set<SeqId> ids;
        for (const auto& x : p.seqs) {
            sum += x.num_tokens;
            RC_ASSERT(x.num_tokens > 0);
            RC_ASSERT(ids.insert(x.id).second);
            // Blocks cover what the step writes.
            RC_ASSERT(int64_t(bm.table(x.id).size()) * block_size >=
                      int64_t(x.pos_start + x.num_tokens));
        }
        RC_ASSERT(sum == p.num_batched_tokens);
        for (SeqId id : p.timed_out) ++ended[id];
        s.on_step_done(p);
        sampled(p, *rc::gen::inRange(0, 3));
        const auto st = bm.stats();
        // Blocks held, counted from the tables of every sequence the block manager knows,
        // plus the free and cached lists, make up the pool (stats().used is derived).
        std::set<int32_t> held;
        for (SeqId id{1}; id < next; ++id) {
            if (bm.has(id)) held.insert(bm.table(id).begin(), bm.table(id).end());
        }
        RC_ASSERT(st.used == int64_t(held.size()));
        RC_ASSERT(st.free + int64_t(held.size()) + st.cached == num_blocks);
        RC_ASSERT(bm.consistent());
    }
    // Drain: with no new arrivals everything finishes.
    for (int t = 0; t < 100000 && (!s.running().empty() || !s.waiting().empty()); ++t) {
        BatchPlan p = s.schedule(Clock::now());
        s.on_step_done(p);
        sampled(p, 1);
    }
    RC_ASSERT(s.running().empty());
    RC_ASSERT(s.waiting().empty());
    for (SeqId id{1}; id < next; ++id) RC_ASSERT(ended[id] == 1);
    const auto st = bm.stats();
    RC_ASSERT(st.used == 0);
}

}  // namespace
}  // namespace pagoda::scheduler
