// Engine: continuous batching end to end over real models (the bundled stories260K and a
// random-weight GQA model): batch invariance, preemption, prefix caching, cancellation,
// seeded sampling, stop rules, n > 1, logprobs, deadlines, queue limits and knobs.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "base/check.h"
#include "base/log.h"
#include "engine/engine_test_util.h"
#include "model/test_model.h"
#include "testdata/stories260k_golden.h"

namespace pagoda::engine {
namespace {

using namespace std::chrono_literals;
using namespace test_util;

// Submits every request from another thread at random moments; returns outputs in order.
std::vector<Output> together(Engine& e, const std::vector<Request>& reqs, uint64_t seed) {
    std::vector<std::shared_ptr<RequestStream>> streams(reqs.size());
    std::thread submitter([&] {
        std::mt19937_64 rng(seed);
        for (size_t i = 0; i < reqs.size(); ++i) {
            auto s = e.submit(reqs[i]);
            PAGODA_CHECK(s.ok()) << s.error().message;
            streams[i] = *s;
            if (rng() % 2) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
        }
    });
    submitter.join();
    std::vector<Output> out;
    for (auto& s : streams) out.push_back(collect(*s)[0]);
    return out;
}

struct InvarianceCase {
    const char* model;
    int block_size;
    int budget;
    kvcache::KvDtype dtype = kvcache::KvDtype::kF32;
};

class BatchInvariance : public ::testing::TestWithParam<InvarianceCase> {};

TEST_P(BatchInvariance, GreedyIdsMatchEachRequestAlone) {
    const auto c = GetParam();
    model::Model& m = model_named(c.model);
    EngineConfig cfg = config(c.block_size, c.budget);
    cfg.kv.dtype = c.dtype;
    const auto prompts = random_prompts(m, 32, 2, 150, 7);
    std::vector<Request> reqs;
    for (size_t i = 0; i < prompts.size(); ++i)
        reqs.push_back(greedy(prompts[i], 8 + int(i % 5) * 6));
    auto e = Engine::create(m, cfg);
    ASSERT_TRUE(e.ok()) << e.error().message;
    const auto outs = together(**e, reqs, 3);
    const auto st = (*e)->stats();
    EXPECT_GT(st->steps, 0u);
    std::map<uint64_t, int> requests_per_step;  // step -> requests that got tokens in it
    for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_EQ(outs[i].finish, FinishReason::kLength) << i;
        ASSERT_EQ(int(outs[i].ids.size()), reqs[i].sampling.max_tokens) << i;
        EXPECT_EQ(outs[i].ids, alone(m, cfg, reqs[i]))
            << "request " << i << " (prompt " << prompts[i].size() << " tokens)";
        for (uint64_t step :
             std::set<uint64_t>(outs[i].token_steps.begin(), outs[i].token_steps.end())) {
            ++requests_per_step[step];
        }
    }
    // Invariance was tested on batches: steps in which several requests produced tokens.
    int batched_steps_seen = 0;
    for (const auto& [step, n] : requests_per_step) batched_steps_seen += n > 1;
    EXPECT_GT(batched_steps_seen, 0);
    // The requests really shared steps: fewer steps than running them one after another.
    int64_t serial_steps = 0;
    for (const auto& r : reqs) serial_steps += r.sampling.max_tokens;
    EXPECT_LT(int64_t(st->steps), serial_steps);
    EXPECT_EQ(st->blocks.used, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Engine, BatchInvariance,
    ::testing::Values(
        InvarianceCase{"stories260k", 16, 64}, InvarianceCase{"stories260k", 16, 2048},
        InvarianceCase{"stories260k", 64, 64}, InvarianceCase{"stories260k", 64, 2048},
        InvarianceCase{"tiny-gqa", 16, 64}, InvarianceCase{"tiny-gqa", 16, 2048},
        InvarianceCase{"tiny-gqa", 64, 64}, InvarianceCase{"tiny-gqa", 64, 2048},
        InvarianceCase{"tiny-gqa-hd32", 16, 64, kvcache::KvDtype::kQ8_0},
        InvarianceCase{"tiny-gqa-hd32", 48, 2048, kvcache::KvDtype::kQ8_0},
        InvarianceCase{"tiny-gqa-hd32", 16, 64, kvcache::KvDtype::kQ4_0},
        InvarianceCase{"tiny-gqa-hd32", 48, 2048, kvcache::KvDtype::kQ4_0},
        InvarianceCase{"tiny-mixtral", 16, 64}, InvarianceCase{"tiny-olmoe", 32, 2048}),
    [](const auto& info) {
        std::string n = std::string(info.param.model) + "_bs" +
                        std::to_string(info.param.block_size) + "_budget" +
                        std::to_string(info.param.budget) + "_" +
                        kvcache::kv_dtype_name(info.param.dtype);
        std::erase(n, '-');
        return n;
    });

TEST(Engine, StoriesGoldenContinuation) {
    auto e = Engine::create(stories(), config(16, 2048));
    ASSERT_TRUE(e.ok());
    Request r = greedy(stories().tokenizer().encode("Once upon a time"), 32);
    auto s = (*e)->submit(r);
    ASSERT_TRUE(s.ok());
    const auto o = collect(**s)[0];
    EXPECT_EQ(o.ids, testdata::kStoriesGoldenIds);
    EXPECT_EQ(o.text, testdata::kStoriesGoldenText);
    EXPECT_EQ(o.usage.prompt_tokens, 5);
    EXPECT_EQ(o.usage.completion_tokens, 32);
    EXPECT_GT(o.timings.ttft_seconds(), 0.0);
    EXPECT_GE(o.timings.e2e_seconds(), o.timings.ttft_seconds());
}

TEST(Engine, PreemptionWithTinyKvCacheKeepsOutputs) {
    set_log_level(LogLevel::kWarn);
    model::Model& m = stories();
    const auto prompts = random_prompts(m, 32, 10, 60, 21);
    std::vector<Request> reqs;
    for (const auto& p : prompts) reqs.push_back(greedy(p, 24));
    EngineConfig small = config(16, 256, /*num_blocks=*/12);  // 192 token slots for 32 requests
    auto e = Engine::create(m, small);
    ASSERT_TRUE(e.ok());
    const auto outs = together(**e, reqs, 5);
    EXPECT_GT((*e)->stats()->preemptions, 0);
    int preempted_requests = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
        EXPECT_EQ(outs[i].ids, alone(m, config(16, 2048), reqs[i])) << "request " << i;
        preempted_requests += outs[i].timings.num_preemptions > 0;
    }
    EXPECT_GT(preempted_requests, 0);
    set_log_level(LogLevel::kInfo);
}

TEST(Engine, PrefixCachingComputesOnlyTheSuffix) {
    model::Model& m = stories();
    const int bs = 16;
    auto base = random_prompts(m, 1, 3 * bs, 3 * bs, 99)[0];  // exactly three blocks
    Request a = greedy(base, 8), b = greedy(base, 8);
    a.prompt_ids.insert(a.prompt_ids.end(), {300, 301, 302, 303, 304});
    b.prompt_ids.insert(b.prompt_ids.end(), {400, 401, 402, 403, 404, 405, 406});
    auto e = Engine::create(m, config(bs, 2048));
    ASSERT_TRUE(e.ok());
    auto sa = (*e)->submit(a);
    ASSERT_TRUE(sa.ok());
    collect(**sa);
    const int64_t before = (*e)->stats()->prompt_tokens;
    auto sb = (*e)->submit(b);
    ASSERT_TRUE(sb.ok());
    const auto ob = collect(**sb)[0];
    const auto st = (*e)->stats();  // published before the last event was pushed
    EXPECT_EQ(st->prompt_tokens - before, 7) << "only the 7-token suffix is computed";
    EXPECT_EQ(ob.usage.cached_tokens, 3 * bs);
    EXPECT_GE(st->blocks.prefix_hits, 3);
    // Same output without the cache.
    EngineConfig off = config(bs, 2048);
    off.enable_prefix_caching = false;
    EXPECT_EQ(ob.ids, alone(m, off, b));
}

TEST(Engine, CancelFreesBlocksWithinOneStep) {
    auto e = Engine::create(stories(), config(16, 2048));
    ASSERT_TRUE(e.ok());
    Request r = greedy(random_prompts(stories(), 1, 40, 40, 5)[0], 400);
    auto s = (*e)->submit(r);
    ASSERT_TRUE(s.ok());
    Event ev;
    ASSERT_TRUE((*s)->next(ev));  // running
    const uint64_t step_at_cancel = (*e)->stats()->steps;
    EXPECT_GT((*e)->stats()->blocks.used, 0);
    (*s)->cancel();
    const auto o = collect(**s)[0];
    EXPECT_EQ(o.finish, FinishReason::kCancelled);
    EXPECT_LE(o.last_step, step_at_cancel + 1);
    // The snapshot of the cancelling step was published before its event was pushed.
    EXPECT_EQ((*e)->stats()->blocks.used, 0);
    EXPECT_EQ((*e)->stats()->finished_by_reason[int(FinishReason::kCancelled)], 1);
    EXPECT_EQ((*e)->num_unfinished(), 0);
}

TEST(Engine, SeededSamplingIsBatchIndependent) {
    model::Model& m = stories();
    const auto prompts = random_prompts(m, 12, 5, 80, 13);
    std::vector<Request> reqs;
    for (size_t i = 0; i < prompts.size(); ++i) {
        Request r = greedy(prompts[i], 20);
        r.sampling.temperature = 0.9f;
        r.sampling.top_p = 0.95f;
        r.sampling.seed = 1234 + i;
        reqs.push_back(r);
    }
    auto e = Engine::create(m, config(16, 128));
    ASSERT_TRUE(e.ok());
    const auto outs = together(**e, reqs, 17);
    for (size_t i = 0; i < reqs.size(); ++i)
        EXPECT_EQ(outs[i].ids, alone(m, config(64, 2048), reqs[i])) << i;
}

TEST(Engine, StopStringsAreNeverEmitted) {
    auto e = Engine::create(stories(), config(16, 2048));
    ASSERT_TRUE(e.ok());
    Request r = greedy(stories().tokenizer().encode("Once upon a time"), 32);
    r.sampling.stop = {"little girl"};
    auto s = (*e)->submit(r);
    ASSERT_TRUE(s.ok());
    const auto o = collect(**s)[0];
    EXPECT_EQ(o.finish, FinishReason::kStop);
    EXPECT_EQ(o.stop_reason, "little girl");
    EXPECT_EQ(o.text, ", there was a ");
}

TEST(Engine, StopTokenIdsAndMinTokens) {
    auto e = Engine::create(stories(), config(16, 2048));
    ASSERT_TRUE(e.ok());
    const auto prompt = stories().tokenizer().encode("Once upon a time");
    const int32_t third = testdata::kStoriesGoldenIds[2];
    Request r = greedy(prompt, 32);
    r.sampling.stop_token_ids = {third};
    auto o = collect(**(*e)->submit(r))[0];
    EXPECT_EQ(o.finish, FinishReason::kStop);
    EXPECT_EQ(o.stop_reason, std::to_string(third));
    EXPECT_EQ(o.ids, std::vector<int32_t>(testdata::kStoriesGoldenIds.begin(),
                                          testdata::kStoriesGoldenIds.begin() + 2));
    // min_tokens masks the stop token until enough tokens were generated.
    r.sampling.min_tokens = 5;
    o = collect(**(*e)->submit(r))[0];
    EXPECT_GE(o.ids.size(), 5u);
}

TEST(Engine, ParallelSamplesShareThePrompt) {
    auto e = Engine::create(stories(), config(16, 2048));
    ASSERT_TRUE(e.ok());
    Request r = greedy(random_prompts(stories(), 1, 37, 37, 3)[0], 16);
    r.sampling.n = 4;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 42;
    const auto outs = collect(**(*e)->submit(r), 4);
    std::set<std::vector<int32_t>> distinct;
    for (const auto& o : outs) {
        EXPECT_EQ(o.ids.size(), 16u);
        EXPECT_EQ(o.finish, FinishReason::kLength);
        distinct.insert(o.ids);
    }
    EXPECT_GT(distinct.size(), 1u);
    EXPECT_EQ(outs[0].usage.completion_tokens, 64);
    // The prompt was computed once.
    EXPECT_EQ((*e)->stats()->prompt_tokens, 37);
    // Same seed, same samples.
    const auto again = collect(**(*e)->submit(r), 4);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(again[size_t(i)].ids, outs[size_t(i)].ids);
}

TEST(Engine, LogprobsOfGreedyTokenAreTheMaximum) {
    auto e = Engine::create(stories(), config(16, 2048));
    ASSERT_TRUE(e.ok());
    Request r = greedy(stories().tokenizer().encode("Once upon a time"), 4);
    r.sampling.logprobs = 3;
    auto s = *(*e)->submit(r);
    Event ev;
    int n = 0;
    while (s->next(ev)) {
        for (size_t i = 0; i < ev.logprobs.size(); ++i) {
            const auto& lp = ev.logprobs[i];
            ASSERT_EQ(lp.top.size(), 3u);
            EXPECT_EQ(lp.top[0].first, ev.token_ids[i]);
            EXPECT_FLOAT_EQ(lp.top[0].second, lp.logprob);
            EXPECT_LE(lp.logprob, 0.0f);
            EXPECT_GE(lp.top[0].second, lp.top[1].second);
            ++n;
        }
    }
    EXPECT_EQ(n, 4);
}

TEST(Engine, PenaltiesAndBiasChangeTheOutput) {
    auto e = Engine::create(stories(), config(16, 2048));
    ASSERT_TRUE(e.ok());
    const auto prompt = stories().tokenizer().encode("Once upon a time");
    Request r = greedy(prompt, 8);
    r.sampling.logit_bias = {{testdata::kStoriesGoldenIds[0], -100.0f}};
    auto o = collect(**(*e)->submit(r))[0];
    EXPECT_NE(o.ids[0], testdata::kStoriesGoldenIds[0]);
    Request f = greedy(prompt, 32);
    f.sampling.frequency_penalty = 2.0f;
    o = collect(**(*e)->submit(f))[0];
    EXPECT_NE(o.ids, testdata::kStoriesGoldenIds);
}

TEST(Engine, ValidationErrorsAreClear) {
    auto e = Engine::create(stories(), config(16, 2048, 64));
    ASSERT_TRUE(e.ok());
    Request r = greedy({1, 2, 3}, 8);
    r.sampling.top_p = 0.0f;
    auto s = (*e)->submit(r);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("top_p"), std::string::npos);
    auto bad_id = (*e)->submit(greedy({1, 999999}, 4));
    ASSERT_FALSE(bad_id.ok());
    EXPECT_NE(bad_id.error().message.find("out of range"), std::string::npos);
    auto too_long = (*e)->submit(greedy(std::vector<int32_t>(5000, 5), 4));
    ASSERT_FALSE(too_long.ok());
    EXPECT_EQ(too_long.error().code, ErrorCode::kOutOfRange);
    auto too_big =
        (*e)->submit(greedy(std::vector<int32_t>(100, 5), 1000));  // 64 blocks x 16 = 1024 slots
    ASSERT_FALSE(too_big.ok());
    EXPECT_NE(too_big.error().message.find("KV blocks"), std::string::npos);
}

TEST(Engine, QueuedPastDeadlineTimesOut) {
    auto e = Engine::create(stories(), config(16, 2048));
    ASSERT_TRUE(e.ok());
    Request r = greedy({1, 2, 3}, 4);
    r.deadline = Clock::now() - 1ms;
    const auto o = collect(**(*e)->submit(r))[0];
    EXPECT_EQ(o.finish, FinishReason::kTimeout);
    EXPECT_TRUE(o.ids.empty());
    EXPECT_EQ((*e)->stats()->finished_by_reason[int(FinishReason::kTimeout)], 1);
    EXPECT_EQ((*e)->stats()->queue.waiting, 0);
}

TEST(Engine, FullQueueRejectsWithRetryHint) {
    EngineConfig c = config(16, 2048);
    c.sched.knobs.max_waiting_requests = 2;
    auto e = Engine::create(stories(), c);
    ASSERT_TRUE(e.ok());
    std::vector<std::shared_ptr<RequestStream>> ok;
    int rejected = 0;
    for (int i = 0; i < 50; ++i) {
        auto s = (*e)->submit(greedy({1, 2, 3, int32_t(10 + i)}, 50));
        if (s.ok()) {
            ok.push_back(*s);
        } else {
            EXPECT_EQ(s.error().code, ErrorCode::kResourceExhausted);
            ++rejected;
        }
    }
    int finished = 0;
    for (auto& s : ok) {
        const auto o = collect(*s)[0];
        finished += o.finish == FinishReason::kLength || o.finish == FinishReason::kRejected;
    }
    EXPECT_EQ(finished, int(ok.size()));  // every accepted request ends exactly once
    EXPECT_GT(rejected, 0);
}

// Retry-After: the queued tokens over the recent token rate, between 1 and 60 seconds.
TEST(Engine, RetryAfterEstimateFollowsQueueAndRate) {
    EXPECT_EQ(estimate_retry_after_seconds(5000, 0.0), 1.0);  // no rate measured yet
    EXPECT_EQ(estimate_retry_after_seconds(1000, 100.0), 10.0);
    EXPECT_EQ(estimate_retry_after_seconds(2500, 100.0), 25.0);
    EXPECT_EQ(estimate_retry_after_seconds(10, 100.0), 1.0);        // floor
    EXPECT_EQ(estimate_retry_after_seconds(1000000, 100.0), 60.0);  // ceiling
}

TEST(Engine, KnobsChangeBetweenSteps) {
    auto e = Engine::create(stories(), config(16, 2048));
    ASSERT_TRUE(e.ok());
    RuntimeKnobs k = (*e)->knobs();
    k.max_num_seqs = 3;
    k.max_num_batched_tokens = 40;
    ASSERT_TRUE((*e)->set_knobs(k).ok());
    EXPECT_EQ((*e)->knobs().max_num_seqs, 3);
    RuntimeKnobs bad = k;
    bad.max_num_batched_tokens = 0;
    auto st = (*e)->set_knobs(bad);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("max_num_batched_tokens"), std::string::npos);
    // 8 requests of 30-token prompts: without the knobs one step would run all 8 and
    // prefill 240 tokens.
    const auto prompts = random_prompts(stories(), 8, 30, 30, 5);
    std::vector<std::shared_ptr<RequestStream>> ss;
    for (const auto& p : prompts) ss.push_back(*(*e)->submit(greedy(p, 6)));
    std::map<uint64_t, int> requests_per_step;
    for (auto& s : ss) {
        const Output o = collect(*s)[0];
        EXPECT_EQ(o.ids.size(), 6u);
        for (uint64_t step : std::set<uint64_t>(o.token_steps.begin(), o.token_steps.end())) {
            ++requests_per_step[step];
        }
    }
    int most = 0;
    for (const auto& [step, n] : requests_per_step) most = std::max(most, n);
    EXPECT_EQ(most, 3) << "max_num_seqs 3: at most 3 sequences a step, and the batch fills";
    const auto snap = (*e)->stats();
    EXPECT_EQ(snap->knobs.max_num_seqs, 3);
    EXPECT_EQ(snap->knobs.max_num_batched_tokens, 40);
    EXPECT_LE(snap->peak_step_batched_tokens, 40);
    EXPECT_GT(snap->peak_step_batched_tokens, 30) << "the token cap binds: prompts are chunked";
}

// --stream-interval: a sample's token events are gathered N at a time into one event and
// the consumer woken once for it; the first event, a sample's finish and the request's
// last event go (and wake it) at once; no token, text or step time is lost or reordered.
TEST(RequestStream, GathersEveryIntervalEventsAndSendsTheEndsAtOnce) {
    for (int interval : {1, 4}) {
        RequestStream s(1, nullptr);
        std::vector<size_t> woken_at;  // events pushed when each notify ran
        size_t pushed = 0;
        s.set_notify([&] { woken_at.push_back(pushed); }, interval);
        const Clock::time_point t0 = Clock::now();
        for (int i = 0; i < 10; ++i) {
            Event ev;
            ev.token_ids = {i};
            ev.text = std::to_string(i);
            ev.time = t0 + std::chrono::milliseconds(i);
            ev.step = uint64_t(i);
            if (i == 9) ev.finish = FinishReason::kLength;
            ++pushed;
            s.push(ev);
        }
        Event last;
        last.request_done = true;
        ++pushed;
        s.push(last);
        const std::vector<size_t> want =
            interval == 1 ? std::vector<size_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
                          : std::vector<size_t>{1, 5, 9, 10, 11};
        EXPECT_EQ(woken_at, want) << "interval " << interval;
        std::vector<Event> taken;
        while (auto ev = s.try_next()) taken.push_back(std::move(*ev));
        ASSERT_EQ(taken.size(), interval == 1 ? 11u : 5u) << "interval " << interval;
        std::vector<int32_t> ids;
        std::string text;
        std::vector<Clock::time_point> times;
        for (const Event& ev : taken) {
            ids.insert(ids.end(), ev.token_ids.begin(), ev.token_ids.end());
            text += ev.text;
            if (ev.token_ids.empty()) continue;
            if (ev.step_times.empty()) {
                times.push_back(ev.time);
            } else {
                times.insert(times.end(), ev.step_times.begin(), ev.step_times.end());
                EXPECT_EQ(ev.step_times.back(), ev.time);
            }
        }
        EXPECT_EQ(ids, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
        EXPECT_EQ(text, "0123456789");
        ASSERT_EQ(times.size(), 10u);
        for (size_t i = 0; i < times.size(); ++i) {
            EXPECT_EQ(times[i], t0 + std::chrono::milliseconds(i)) << "step " << i;
        }
        if (interval == 4) {
            EXPECT_EQ(taken[1].token_ids, (std::vector<int32_t>{1, 2, 3, 4}));
            EXPECT_EQ(taken[1].step, 4u);
            EXPECT_TRUE(taken[3].finish.has_value());
        }
        EXPECT_TRUE(taken.back().request_done);
        EXPECT_TRUE(s.done());
    }
}

// The engine's outbox reuses its slots step after step (their buffers kept): a slot taken
// again starts empty, whichever stream it served before (b ends at step 4, in the slot a
// takes next), so each stream gets its own tokens, text and end once, in order, gathered
// (interval 4) or not (1).
TEST(Outbox, ReusedSlotsCarryNothingOverBetweenSteps) {
    RequestStream a(1, nullptr), b(2, nullptr);
    a.set_notify([] {}, 4);
    b.set_notify([] {}, 1);
    auto last_step = [&](const RequestStream* s) { return s == &a ? 8 : 4; };
    auto token = [&](const RequestStream* s, int step) {
        return int32_t(step * 10 + int(s->id()));
    };
    std::map<const RequestStream*, std::vector<Event>> got;
    Outbox out;
    const Clock::time_point t0 = Clock::now();
    for (int step = 0; step < 9; ++step) {
        // The streams trade slots every step: slot 0 served the other one last time.
        for (RequestStream* s : {step % 2 ? &a : &b, step % 2 ? &b : &a}) {
            if (step > last_step(s)) continue;
            Event& ev = out.add(s, 0, t0 + std::chrono::milliseconds(step), uint64_t(step));
            ev.token_ids.push_back(token(s, step));
            ev.text += std::to_string(token(s, step)) + ",";  // as a finish appends its text
            if (step == last_step(s)) {
                ev.finish = FinishReason::kLength;
                ev.request_done = true;
            }
        }
        out.deliver();
        EXPECT_TRUE(out.empty());
        for (RequestStream* s : {&a, &b}) {  // taken every step, as the server's pump does
            std::vector<Event> taken;
            s->take_all(taken);
            for (Event& ev : taken) got[s].push_back(std::move(ev));
            EXPECT_EQ(s->done(), step >= last_step(s)) << "stream " << s->id() << " step " << step;
        }
    }
    for (const RequestStream* s : {&a, &b}) {
        std::vector<int32_t> ids, want;
        std::string text, want_text;
        int finishes = 0;
        for (const Event& ev : got[s]) {
            ids.insert(ids.end(), ev.token_ids.begin(), ev.token_ids.end());
            text += ev.text;
            finishes += ev.finish ? 1 : 0;
        }
        for (int step = 0; step <= last_step(s); ++step) {
            want.push_back(token(s, step));
            want_text += std::to_string(token(s, step)) + ",";
        }
        EXPECT_EQ(ids, want) << "stream " << s->id();
        EXPECT_EQ(text, want_text) << "stream " << s->id();
        EXPECT_EQ(finishes, 1) << "stream " << s->id();
    }
}

// Gathering keeps each sample's events apart: n > 1 interleaves samples, and an event of
// another sample queues what was gathered first.
TEST(RequestStream, GathersOneSampleAtATime) {
    RequestStream s(1, nullptr);
    int woken = 0;
    s.set_notify([&] { ++woken; }, 8);
    for (int i = 0; i < 6; ++i) {
        Event ev;
        ev.index = i < 4 ? 0 : 1;
        ev.token_ids = {i};
        s.push(ev);
    }
    Event last;
    last.index = 1;
    last.finish = FinishReason::kStop;
    last.request_done = true;
    s.push(last);
    std::vector<std::pair<int, std::vector<int32_t>>> got;
    while (auto ev = s.try_next()) got.emplace_back(ev->index, ev->token_ids);
    const std::vector<std::pair<int, std::vector<int32_t>>> want = {
        {0, {0}}, {0, {1, 2, 3}}, {1, {4, 5}}, {1, {}}};
    EXPECT_EQ(got, want);
    EXPECT_EQ(woken, 3);
}

// Every event once, in order, whichever way it is taken: one at a time, all at once, mixed,
// with pushes between takes and a slow reader that lets the queue grow past its compaction.
TEST(RequestStream, TakesEveryEventOnceInOrder) {
    RequestStream s(1, nullptr);
    std::vector<int32_t> seen;
    std::vector<Event> batch;
    int32_t next = 0;
    auto push = [&](int n) {
        for (int i = 0; i < n; ++i) {
            Event ev;
            ev.token_ids = {next++};
            s.push(ev);
        }
    };
    auto take_one = [&] {
        auto ev = s.try_next();
        ASSERT_TRUE(ev.has_value());
        seen.push_back(ev->token_ids.at(0));
    };
    auto take_all = [&] {
        s.take_all(batch);
        for (const Event& ev : batch) seen.push_back(ev.token_ids.at(0));
    };
    push(3);
    take_one();
    take_all();  // the two left after one was taken
    push(200);
    for (int i = 0; i < 150; ++i) take_one();  // past the compaction point, 50 still queued
    push(5);
    take_all();
    take_all();  // nothing queued: nothing taken
    EXPECT_TRUE(batch.empty());
    push(2);
    Event ev;
    ASSERT_TRUE(s.next(ev));
    seen.push_back(ev.token_ids.at(0));
    take_all();
    std::vector<int32_t> want(static_cast<size_t>(next));
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(seen, want);
    EXPECT_FALSE(s.try_next().has_value());
}

}  // namespace
}  // namespace pagoda::engine
