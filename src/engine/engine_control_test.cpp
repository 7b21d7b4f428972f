// The engine under the control plane and the simulated GPU: KV re-layout between steps,
// the finished-length feed of the context-length statistics, warm passes during the idle
// spin (outputs and the prefix cache untouched), and the simulated backend
// (batch invariance, determinism, sizing as on the card, and a property test of random
// workloads with preemptions: every request ends once, budgets hold, every block comes back).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <optional>
#include <thread>

#include "base/check.h"
#include "base/log.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"

namespace pagoda::engine {
namespace {

using namespace test_util;

// An outbox slot's tail (logprobs, stop reason, error, usage, timings) is written only with
// the flag that makes the slot's next event clear it. A request that ended hands its slot
// to the next in the step (c's to b, then b's to a): their events carry none of its tail.
// And a stream notified every 4 events gathers every token's logprob.
TEST(Outbox, TailsStayWithTheirEvents) {
    set_log_level(LogLevel::kWarn);
    auto e = Engine::create(stories(), config(16, 2048));
    ASSERT_TRUE(e.ok());
    const tokenizer::Tokenizer& tok = stories().tokenizer();
    auto sc = *(*e)->submit(greedy(tok.encode("One day"), 4));
    auto sb = *(*e)->submit(greedy(tok.encode("The little dog"), 20));
    Request a = greedy(tok.encode("Once upon a time"), 40);
    a.sampling.logprobs = 1;
    auto sa = *(*e)->submit(a);
    sa->set_notify([] {}, 4);  // the first events may pass before: the rest are gathered
    for (auto [s, tokens] : {std::pair{sc.get(), 4}, {sa.get(), 40}, {sb.get(), 20}}) {
        size_t ids = 0, logprobs = 0, plain = 0;
        Event ev;
        while (s->next(ev)) {
            ids += ev.token_ids.size();
            logprobs += ev.logprobs.size();
            if (ev.request_done) {
                EXPECT_EQ(ev.usage.completion_tokens, tokens);
                continue;
            }
            ++plain;
            EXPECT_TRUE(ev.stop_reason.empty() && ev.error.empty()) << tokens << " " << plain;
            EXPECT_EQ(ev.usage.completion_tokens, 0) << tokens << " " << plain;
            EXPECT_EQ(ev.timings.steps, 0) << tokens << " " << plain;
        }
        EXPECT_EQ(ids, size_t(tokens));
        EXPECT_EQ(logprobs, s == sa.get() ? ids : 0u) << tokens;
        EXPECT_GT(plain, 0u);
    }
}

// KV re-layout between steps: running sequences keep their computed tokens (their K/V is
// copied into the new block size) or, when the dtype changes, are recomputed in the new pool;
// greedy outputs do not change either way; a pool a live sequence cannot fit is refused and
// the old one serves.
void relayout_keeps_outputs(model::Model& m, kvcache::KvDtype dtype) {
    set_log_level(LogLevel::kWarn);
    EngineConfig cfg = config(16, 64);
    cfg.kv.dtype = dtype;
    const auto prompts = random_prompts(m, 16, 10, 60, 31);
    auto e = Engine::create(m, cfg);
    ASSERT_TRUE(e.ok());
    std::vector<std::shared_ptr<RequestStream>> ss;
    for (const auto& p : prompts) ss.push_back(*(*e)->submit(greedy(p, 40)));
    // The first re-layout finds the requests queued; the next ones find them running.
    kvcache::KvCacheConfig kv = (*e)->kv_config();
    int64_t preempted = 0, moved = 0, copied = 0;
    for (int bs : {48, 8, 16, 32}) {
        kv.block_size = bs;
        kv.num_blocks = 0;
        kv.memory_bytes = 8 << 20;
        auto rep = (*e)->relayout(kv);
        ASSERT_TRUE(rep.ok()) << rep.error().message;
        EXPECT_EQ(rep->block_size, bs);
        EXPECT_EQ((*e)->kv_block_size(), bs);
        preempted += rep->sequences;
        moved += rep->moved_sequences;
        copied += rep->copied_tokens;
    }
    EXPECT_GT(moved, 0) << "re-layouts happened while sequences ran, and copied them over";
    EXPECT_GT(copied, moved);
    EXPECT_EQ(preempted, 0) << "the same dtype: nothing recomputed";
    // Too small for a live 100-token sequence: refused, the 32-token pool keeps serving.
    auto long_one = (*e)->submit(greedy(random_prompts(m, 1, 20, 20, 99)[0], 100));
    ASSERT_TRUE(long_one.ok());
    kv.block_size = 8;
    kv.memory_bytes = int64_t((*e)->kv_cache_bytes()) / (*e)->num_kv_blocks();  // 4 blocks of 8
    auto refused = (*e)->relayout(kv);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message.find("live sequence"), std::string::npos);
    EXPECT_NE(refused.error().message.find("the old pool keeps serving"), std::string::npos)
        << refused.error().message;
    EXPECT_EQ((*e)->kv_block_size(), 32);
    // Every output first: the baselines run on another engine over the same model, which must
    // not run forward passes at the same time as this one (Model::forward is single-caller).
    std::vector<Output> outs;
    for (auto& s : ss) outs.push_back(collect(*s)[0]);
    EXPECT_EQ(collect(**long_one)[0].ids.size(), 100u);
    for (size_t i = 0; i < ss.size(); ++i) {
        const Output& o = outs[i];
        EXPECT_EQ(o.finish, FinishReason::kLength);
        EXPECT_EQ(o.ids, alone(m, cfg, greedy(prompts[i], 40))) << "request " << i;
    }
    EXPECT_EQ((*e)->stats()->blocks.used, 0);
    EXPECT_EQ((*e)->stats()->relayout_evictions, preempted);
    EXPECT_GE((*e)->stats()->preemptions, preempted);
    set_log_level(LogLevel::kInfo);
}

TEST(EngineRelayout, UnderLoadKeepsGreedyOutputsAndRefusesWhatCannotFit) {
    relayout_keeps_outputs(stories(), kvcache::KvDtype::kF32);
}

// q8_0 and q4_0 rows are copied whole (kv_pool.cpp copy_rows_from).
TEST(EngineRelayout, Q8KvKeepsGreedyOutputs) {
    relayout_keeps_outputs(tiny_hd32(), kvcache::KvDtype::kQ8_0);
}
TEST(EngineRelayout, Q4KvKeepsGreedyOutputs) {
    relayout_keeps_outputs(tiny_hd32(), kvcache::KvDtype::kQ4_0);
}

// The simulated GPU backend runs this same engine: Llama-3-8B on an A100-80G at TP 2, with
// modelled time divided by a million (no real waiting).
std::unique_ptr<model::Model> sim_model(uint64_t seed, double eos_probability = 0) {
    model::SimOptions o;
    o.model = "llama-3-8b";
    o.vocab_path = testdata::kStoriesPath;
    o.gpu = *model::sim::find_gpu("a100-80g");
    o.tp = 2;
    o.speed = 1e6;
    o.seed = seed;
    o.eos_probability = eos_probability;
    auto m = model::Model::simulate(o);
    PAGODA_CHECK(m.ok()) << m.error().message;
    return std::move(m).value();
}

EngineConfig sim_config(const model::Model& m) {
    EngineConfig c = config(16, 2048, 0);
    auto plan = m.perf_model()->memory(0.9, 2048);
    PAGODA_CHECK(plan.ok()) << plan.error().message;
    c.kv.memory_bytes = plan->kv;
    c.kv.dtype = kvcache::KvDtype::kBF16;
    c.kv.virtual_memory = true;
    return c;
}

// One snapshot: a knob change shows in stats() as soon as set_knobs() returns (no step
// needed), a refused one never shows, and the layout and knobs come in one value.
TEST(EngineSnapshot, AppliedChangesShowAtOnceRefusedOnesNever) {
    set_log_level(LogLevel::kWarn);
    model::Model& m = stories();
    auto e = Engine::create(m, config(16, 64));
    ASSERT_TRUE(e.ok());
    std::vector<std::shared_ptr<RequestStream>> busy;  // steps with forward passes meanwhile
    for (const auto& p : random_prompts(m, 16, 60, 60, 5))
        busy.push_back(*(*e)->submit(greedy(p, 150)));
    const auto before = (*e)->stats();
    RuntimeKnobs k = before->knobs;
    k.max_num_seqs = 7;
    k.max_waiting_requests = 33;
    ASSERT_TRUE((*e)->set_knobs(k).ok());
    const auto after = (*e)->stats();
    EXPECT_EQ(after->knobs.max_num_seqs, 7);
    EXPECT_EQ(after->knobs.max_waiting_requests, 33);
    EXPECT_EQ((*e)->knobs().max_num_seqs, 7);
    RuntimeKnobs bad = k;
    bad.max_num_seqs = 0;
    EXPECT_FALSE((*e)->set_knobs(bad).ok());
    EXPECT_EQ((*e)->stats()->knobs.max_num_seqs, 7) << "a refused change never shows";
    kvcache::KvCacheConfig kv = (*e)->kv_config();
    kv.block_size = 32;
    ASSERT_TRUE((*e)->relayout(kv).ok());
    const auto relaid = (*e)->stats();
    EXPECT_EQ(relaid->kv.block_size, 32);
    EXPECT_EQ(relaid->block_size, 32);
    EXPECT_EQ(relaid->knobs.max_num_seqs, 7);
    for (auto& b : busy) collect(*b);
}

TEST(EngineSim, BatchInvariantDeterministicAndSizedAsTheCard) {
    set_log_level(LogLevel::kWarn);
    auto m = sim_model(5);
    EXPECT_TRUE(m->simulated());
    EXPECT_EQ(m->config().num_heads, 16) << "one GPU's shard at TP 2";
    EXPECT_EQ(m->config().num_kv_heads, 4);
    const EngineConfig cfg = sim_config(*m);
    auto e = Engine::create(*m, cfg);
    ASSERT_TRUE(e.ok()) << e.error().message;
    // vLLM's sizing at TP 2: (0.9 x 80 GiB - 7.5 GiB weights - activations - 768 MiB) of KV
    // at 2*32*4*128*2 = 65,536 bytes per token per GPU.
    const auto plan = *m->perf_model()->memory(0.9, 2048);
    EXPECT_EQ((*e)->num_kv_blocks(), plan.num_blocks(16));
    EXPECT_GT((*e)->num_kv_blocks(), 60'000);
    const auto prompts = random_prompts(*m, 8, 5, 40, 3);
    std::vector<Output> together_out;
    {
        std::vector<std::shared_ptr<RequestStream>> ss;
        for (const auto& p : prompts) ss.push_back(*(*e)->submit(greedy(p, 30)));
        for (auto& s : ss) together_out.push_back(collect(*s)[0]);
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
        auto s = (*e)->submit(greedy(prompts[i], 30));
        ASSERT_TRUE(s.ok());
        EXPECT_EQ(collect(**s)[0].ids, together_out[i].ids) << "request " << i;
        EXPECT_EQ(together_out[i].ids.size(), 30u);
    }
    EXPECT_EQ((*e)->stats()->blocks.used, 0);
    const model::SimTotals t = m->sim_totals();
    EXPECT_GT(t.steps, 0);
    EXPECT_GT(t.busy_s, 0.0);
    // The same seed gives the same tokens on another engine; another seed does not.
    auto again = sim_model(5), other = sim_model(6);
    auto e2 = Engine::create(*again, sim_config(*again));
    auto e3 = Engine::create(*other, sim_config(*other));
    auto s2 = (*e2)->submit(greedy(prompts[0], 30));
    auto s3 = (*e3)->submit(greedy(prompts[0], 30));
    EXPECT_EQ(collect(**s2)[0].ids, together_out[0].ids);
    EXPECT_NE(collect(**s3)[0].ids, together_out[0].ids);
    // EOS with probability 1: every request stops at its first token unless it ignores EOS.
    auto eos = sim_model(5, 1.0);
    auto e4 = Engine::create(*eos, sim_config(*eos));
    Request r = greedy(prompts[1], 30);
    r.sampling.ignore_eos = false;
    auto s4 = (*e4)->submit(r);
    const Output o4 = collect(**s4)[0];
    EXPECT_EQ(o4.finish, FinishReason::kStop);
    EXPECT_EQ(o4.usage.completion_tokens, 1);
    set_log_level(LogLevel::kInfo);
}

// The simulated GPU samples greedy rows itself (as a GPU server does; no logits reach the
// host): the same tokens as the host's sampler on the logits, which a request asking for
// logprobs still gets. EOS is masked on the host until min_tokens, so those rows are not
// the device's: with EOS likely at every step, output still runs to min_tokens.
TEST(EngineSim, DeviceGreedyTokensAreTheHostSamplersTokens) {
    set_log_level(LogLevel::kWarn);
    for (double eos : {0.0, 0.3, 1.0}) {
        auto m = sim_model(9, eos);
        auto e = Engine::create(*m, sim_config(*m));
        ASSERT_TRUE(e.ok()) << e.error().message;
        const auto prompts = random_prompts(*m, 6, 5, 40, 11);
        std::vector<std::shared_ptr<RequestStream>> device, host;
        for (const auto& p : prompts) {
            Request r = greedy(p, 40);
            r.sampling.ignore_eos = false;
            r.sampling.min_tokens = 5;
            device.push_back(*(*e)->submit(r));
            r.sampling.logprobs = 0;  // the host samples: the row's logits are written
            host.push_back(*(*e)->submit(r));
        }
        for (size_t i = 0; i < prompts.size(); ++i) {
            const Output d = collect(*device[i])[0], h = collect(*host[i])[0];
            EXPECT_EQ(d.ids, h.ids) << "eos " << eos << ", request " << i;
            EXPECT_EQ(d.finish, h.finish);
            EXPECT_GE(d.usage.completion_tokens, 5) << "min_tokens held EOS back";
            if (eos == 1.0) {
                EXPECT_EQ(d.usage.completion_tokens, 6) << "EOS right after";
            }
        }
    }
    set_log_level(LogLevel::kInfo);
}

// The engine's invariants on the simulated backend, under random workloads with a small KV
// pool (preemptions) and random budgets: every accepted request ends exactly once, with
// max_tokens tokens unless EOS came first; no step exceeds the token budget; every block
// is free at the end.
RC_GTEST_PROP(EngineSimProperty, RandomWorkloadsEndOnceWithinBudgetsAndFreeEveryBlock, ()) {
    set_log_level(LogLevel::kWarn);
    const bool eos = *rc::gen::arbitrary<bool>();
    auto m = sim_model(*rc::gen::inRange<uint64_t>(0, 1000), eos ? 0.05 : 0.0);
    const int block_size = *rc::gen::element(8, 16, 32);
    const int budget = *rc::gen::inRange(16, 256);
    EngineConfig cfg = config(block_size, budget, *rc::gen::inRange(8, 64));
    cfg.kv.dtype = kvcache::KvDtype::kBF16;
    cfg.kv.virtual_memory = true;
    cfg.sched.knobs.max_num_seqs = *rc::gen::inRange(1, 16);
    cfg.enable_prefix_caching = *rc::gen::arbitrary<bool>();
    auto e = Engine::create(*m, cfg);
    RC_ASSERT(e.ok());
    const int n = *rc::gen::inRange(1, 24);
    const auto prompts = random_prompts(*m, n, 2, 100, *rc::gen::inRange<uint64_t>(0, 1000));
    std::vector<std::pair<int, std::shared_ptr<RequestStream>>> streams;
    for (const auto& p : prompts) {
        Request r = greedy(p, *rc::gen::inRange(1, 40));
        r.sampling.ignore_eos = !eos;
        auto s = (*e)->submit(r);
        // Too long for this pool or context: refused at once, never half-run.
        if (s.ok()) streams.emplace_back(r.sampling.max_tokens, *s);
    }
    for (auto& [max_tokens, s] : streams) {
        int done = 0;
        int64_t tokens = 0;
        std::optional<FinishReason> finish;
        Event ev;
        while (s->next(ev)) {
            tokens += int64_t(ev.token_ids.size());
            if (ev.finish) finish = ev.finish;
            done += ev.request_done ? 1 : 0;
        }
        RC_ASSERT(done == 1);
        RC_ASSERT(finish.has_value());
        if (*finish == FinishReason::kLength)
            RC_ASSERT(tokens == max_tokens);
        else
            RC_ASSERT(eos && *finish == FinishReason::kStop && tokens < max_tokens);
    }
    for (int i = 0; i < 200 && (*e)->stats()->blocks.used != 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    RC_ASSERT((*e)->stats()->blocks.used == 0);
    RC_ASSERT((*e)->stats()->peak_step_batched_tokens <= budget);
}

TEST(EngineSim, ClearErrors) {
    model::SimOptions o;
    o.vocab_path = testdata::kStoriesPath;
    o.gpu = *model::sim::find_gpu("a100-80g");
    o.model = "llama-9b";
    auto bad_shape = model::Model::simulate(o);
    ASSERT_FALSE(bad_shape.ok());
    EXPECT_NE(bad_shape.error().message.find("unknown shape 'llama-9b' (known: "),
              std::string::npos);
    o.model = "llama-3-8b";
    o.tp = 3;
    auto bad_tp = model::Model::simulate(o);
    ASSERT_FALSE(bad_tp.ok());
    EXPECT_NE(bad_tp.error().message.find("must divide the 32 attention heads"), std::string::npos);
}

TEST(Engine, FinishedLengthsAreContextLengthsOfRequestsThatRan) {
    set_log_level(LogLevel::kWarn);
    auto e = Engine::create(stories(), config(16, 64));
    ASSERT_TRUE(e.ok());
    const auto prompts = random_prompts(stories(), 3, 5, 30, 7);
    std::multiset<int32_t> want;
    for (size_t i = 0; i < prompts.size(); ++i) {
        auto s = (*e)->submit(greedy(prompts[i], int(10 + i)));
        ASSERT_TRUE(s.ok());
        collect(**s);
        want.insert(int32_t(prompts[i].size() + 10 + i));
    }
    // The engine's own warmup requests (a full warmup while serving) are not traffic.
    Request warm = greedy(prompts[0], 3);
    warm.traffic = false;
    collect(**(*e)->submit(std::move(warm)));
    const std::vector<int32_t> got = (*e)->take_finished_lengths();
    EXPECT_EQ(std::multiset<int32_t>(got.begin(), got.end()), want);
    EXPECT_TRUE((*e)->take_finished_lengths().empty()) << "taken once";
    set_log_level(LogLevel::kInfo);
}

// Warm passes borrow a block while the engine idles: they run only while the spin and the
// interval are both on, the prefix cache keeps what it held, and outputs do not change.
TEST(EngineWarm, PassesLeaveCacheAndOutputsAlone) {
    model::Model& m = stories();
    const int bs = 16;
    auto base = random_prompts(m, 1, 3 * bs, 3 * bs, 77)[0];  // exactly three blocks
    Request a = greedy(base, 8), b = greedy(base, 8);
    a.prompt_ids.insert(a.prompt_ids.end(), {300, 301, 302});
    b.prompt_ids.insert(b.prompt_ids.end(), {400, 401, 402, 403});
    auto e = Engine::create(m, config(bs, 2048));
    ASSERT_TRUE(e.ok());
    Engine& en = **e;
    en.set_warm_pass_interval(std::chrono::milliseconds(10));
    auto sa = en.submit(a);
    ASSERT_TRUE(sa.ok());
    collect(**sa);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(en.warm_passes(), 0) << "no spin, no passes";
    en.set_idle_spin(std::chrono::seconds(30));  // from the end of the next request
    auto sc = en.submit(greedy({1, 2, 3}, 2));
    ASSERT_TRUE(sc.ok());
    collect(**sc);
    // Passes run at idle priority: on a loaded host they come slower, so poll.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (en.warm_passes() < 5 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_GE(en.warm_passes(), 5) << "a pass every 10 ms of spin";
    en.set_warm_pass_interval(std::chrono::milliseconds(0));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a pass in flight ends
    const int64_t passes = en.warm_passes();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(en.warm_passes(), passes) << "interval 0: no more passes";
    EXPECT_LE(en.warm_passes_interrupted(), 1);
    en.set_warm_pass_interval(std::chrono::milliseconds(10));
    auto sb = en.submit(b);  // arrives while passes run
    ASSERT_TRUE(sb.ok());
    const auto ob = collect(**sb)[0];
    en.set_idle_spin(std::chrono::microseconds(0));
    EXPECT_EQ(ob.usage.cached_tokens, 3 * bs) << "the prefix cache kept a's blocks";
    EXPECT_EQ(ob.ids, alone(m, config(bs, 2048), b));
}

}  // namespace
}  // namespace pagoda::engine
