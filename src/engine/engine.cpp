// Engine: the implementation (the contract is in engine/engine.h).
#include "engine/engine.h"

#include <algorithm>

#include "base/check.h"
#include "base/log.h"
#include "base/thread_name.h"
#include "kernels/cpu/ops.h"
#include "scheduler/limits.h"

namespace pagoda::engine {

namespace {
double seconds(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}
}  // namespace

const char* finish_reason_name(FinishReason r) {
    switch (r) {
        case FinishReason::kStop: return "stop";
        case FinishReason::kLength: return "length";
        case FinishReason::kCancelled: return "cancelled";
        case FinishReason::kRejected: return "rejected";
        case FinishReason::kTimeout: return "timeout";
        case FinishReason::kError: return "error";
    }
    return "?";
}

StepHistograms::StepHistograms()
    : schedule({1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05}),
      forward({1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0}),
      sample({1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05}),
      output({1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05}),
      step({1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0}),
      idle_wakeup({1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25}),
      grammar_mask({1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5}) {}

double RequestTimings::queue_seconds() const {
    return scheduled ? seconds(arrival, first_scheduled) : 0.0;
}
double RequestTimings::ttft_seconds() const {
    return has_token ? seconds(arrival, first_token) : 0.0;
}
double RequestTimings::e2e_seconds() const { return seconds(arrival, finished); }

Status EngineConfig::validate() const {
    PAGODA_TRY(kv.validate());
    if (sched.max_model_len < 0)
        return make_error(ErrorCode::kInvalidArgument,
                          "max_model_len must be >= 0 (0 = the model's)");
    scheduler::SchedulerConfig s = sched;
    if (s.max_model_len == 0) s.max_model_len = 1;
    return s.validate();
}

Result<std::unique_ptr<Engine>> Engine::create(model::Model& m, const EngineConfig& cfg_in) {
    PAGODA_TRY(cfg_in.validate());
    std::unique_ptr<Engine> e(new Engine());
    e->model_ = &m;
    e->cfg_ = cfg_in;
    const auto& mc = m.config();
    if (e->cfg_.sched.max_model_len == 0) e->cfg_.sched.max_model_len = int(mc.context_length);
    if (e->cfg_.sched.max_model_len > mc.context_length) {
        return make_error(ErrorCode::kInvalidArgument,
                          "max_model_len {} exceeds the model's context length {}",
                          e->cfg_.sched.max_model_len, mc.context_length);
    }
    PAGODA_TRY(e->cfg_.sched.validate());
    PAGODA_ASSIGN_OR_RETURN(
        kvcache::KvPool pool,
        kvcache::KvPool::create(e->cfg_.kv, mc.num_layers, mc.num_kv_heads, mc.head_dim));
    e->pool_ = std::make_unique<kvcache::KvPool>(std::move(pool));
    e->blocks_ = std::make_unique<kvcache::BlockManager>(
        e->pool_->num_blocks(), e->pool_->block_size(), e->cfg_.enable_prefix_caching);
    e->sched_ = std::make_unique<scheduler::Scheduler>(e->cfg_.sched, *e->blocks_);
    e->intake_ = std::make_shared<Intake>();
    const auto& vocab = m.tokenizer().vocab();
    if (vocab.eos != tokenizer::kNoToken) e->end_tokens_.push_back(vocab.eos);
    if (vocab.eot != tokenizer::kNoToken && vocab.eot != vocab.eos)
        e->end_tokens_.push_back(vocab.eot);
    e->totals_.blocks = e->blocks_->stats();
    e->publish_now();
    log_info(
        "engine_ready kv_blocks={} block_size={} kv_mib={:.1f} kv_dtype={} max_model_len={} "
        "max_num_seqs={} max_num_batched_tokens={} prefix_caching={} chunked_prefill={}",
        e->pool_->num_blocks(), e->pool_->block_size(), double(e->pool_->total_bytes()) / (1 << 20),
        kvcache::kv_dtype_name(e->pool_->dtype()), e->cfg_.sched.max_model_len,
        e->cfg_.sched.knobs.max_num_seqs, e->cfg_.sched.knobs.max_num_batched_tokens,
        e->cfg_.enable_prefix_caching ? "on" : "off",
        e->cfg_.sched.enable_chunked_prefill ? "on" : "off");
    e->heartbeat_.store(Clock::now().time_since_epoch().count());
    e->thread_ = std::thread([raw = e.get()] {
        set_thread_name("pagoda-engine");
        kernels::cpu::adopt_num_threads();  // OpenMP keeps --threads per thread
        raw->loop();
    });
    return e;
}

Engine::~Engine() { shutdown(); }

void Engine::shutdown() {
    if (!thread_.joinable()) return;
    {
        std::lock_guard<std::mutex> lock(intake_->mu);
        intake_->stop = true;
    }
    intake_->wake();
    thread_.join();
}

Result<std::shared_ptr<RequestStream>> Engine::submit(Request r) {
    const auto& mc = model_->config();
    if (r.prompt_ids.empty())
        return make_error(ErrorCode::kInvalidArgument, "the prompt is empty (no tokens)");
    for (int32_t id : r.prompt_ids) {
        if (id < 0 || id >= mc.vocab_size) {
            return make_error(ErrorCode::kInvalidArgument,
                              "prompt token id {} is out of range [0, {})", id, mc.vocab_size);
        }
    }
    PAGODA_TRY(r.sampling.validate(int(mc.vocab_size)));
    const int64_t prompt_tokens = int64_t(r.prompt_ids.size());
    const scheduler::LengthCheck len = scheduler::check_context_length(
        prompt_tokens, r.sampling.max_tokens, scheduler::MaxTokens::kCapToContext,
        cfg_.sched.max_model_len);
    if (len.verdict != scheduler::LengthVerdict::kFits)
        return make_error(ErrorCode::kOutOfRange, "{}", len.message);
    // As vLLM: max_tokens is capped to what the context leaves.
    r.sampling.max_tokens = int(len.capped_max_tokens);
    r.sampling.min_tokens = std::min(r.sampling.min_tokens, r.sampling.max_tokens);
    const std::shared_ptr<const EngineStats> snap = stats();
    PAGODA_TRY(scheduler::check_kv_fit(prompt_tokens + r.sampling.max_tokens, snap->kv.block_size,
                                       snap->num_kv_blocks));
    if (!r.arrival) r.arrival = Clock::now();
    std::shared_ptr<RequestStream> stream;
    {
        std::lock_guard<std::mutex> lock(intake_->mu);
        if (intake_->stop)
            return make_error(ErrorCode::kResourceExhausted, "the engine is shutting down");
        if (queued_estimate_.load() >= snap->knobs.max_waiting_requests) {
            return make_error(ErrorCode::kResourceExhausted,
                              "the waiting queue is full ({} requests); retry in {:.0f} s",
                              queued_estimate_.load(), retry_after_seconds());
        }
        stream = std::make_shared<RequestStream>(intake_->next_id++, intake_);
        intake_->pending.emplace_back(stream, std::move(r));
        ++queued_estimate_;
        ++unfinished_;
    }
    intake_->wake();
    return stream;
}

double estimate_retry_after_seconds(int64_t waiting_tokens, double tokens_per_second) {
    if (tokens_per_second <= 0.0) return 1.0;
    return std::clamp(double(waiting_tokens) / tokens_per_second, 1.0, 60.0);
}

double Engine::retry_after_seconds() const {
    return estimate_retry_after_seconds(stats()->queue.waiting_tokens, tokens_per_second_.load());
}

Status Engine::check_knobs(const RuntimeKnobs& k) const {
    PAGODA_TRY(k.validate());
    return scheduler::check_chunked_prefill(k, cfg_.sched.enable_chunked_prefill,
                                            cfg_.sched.max_model_len);
}

Status Engine::set_knobs(const RuntimeKnobs& k) {
    PAGODA_TRY(check_knobs(k));
    std::future<Status> done;
    {
        std::lock_guard<std::mutex> lock(intake_->mu);
        if (intake_->stop)
            return make_error(ErrorCode::kResourceExhausted, "the engine is stopping");
        intake_->knobs.emplace_back(k, std::promise<Status>());
        done = intake_->knobs.back().second.get_future();
    }
    intake_->wake();
    if (done.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
        return make_error(ErrorCode::kInternal, "the knob change was not applied in 120 s");
    }
    return done.get();
}

Result<RelayoutReport> Engine::relayout(const kvcache::KvCacheConfig& kv) {
    PAGODA_TRY(kv.validate());
    std::future<Result<RelayoutReport>> done;
    {
        std::lock_guard<std::mutex> lock(intake_->mu);
        if (intake_->stop)
            return make_error(ErrorCode::kResourceExhausted, "the engine is stopping");
        if (intake_->relayout) {
            return make_error(ErrorCode::kConflict, "another KV re-layout is in progress");
        }
        intake_->relayout = kv;
        intake_->relayout_done = std::promise<Result<RelayoutReport>>();
        done = intake_->relayout_done.get_future();
    }
    intake_->wake();
    if (done.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
        return make_error(ErrorCode::kInternal, "the KV re-layout did not finish in 120 s");
    }
    return done.get();
}

std::shared_ptr<const EngineStats> Engine::stats() const {
    std::lock_guard<std::mutex> lock(pub_mu_);
    return snapshot_;
}

// ---------------------------------------------------------------------------------------
// The loop and the published snapshot (the step itself: engine_step.cpp)

void Engine::loop() {
    for (;;) {
        heartbeat_.store(Clock::now().time_since_epoch().count());
        if (reqs_.empty()) spin_while_idle();
        {
            std::unique_lock<std::mutex> lock(intake_->mu);
            if (intake_->stop) break;
            if (reqs_.empty()) {
                const bool work = intake_->cv.wait_for(lock, std::chrono::seconds(1), [&] {
                    return intake_->stop || !intake_->pending.empty() ||
                           !intake_->cancels.empty() || !intake_->knobs.empty() ||
                           intake_->relayout;
                });
                if (intake_->stop) break;
                if (!work) continue;  // idle: only the heartbeat
            }
        }
        step();
    }
    // Shutting down: whatever is left ends as cancelled.
    apply_intake();
    for (auto& r : reqs_) {
        if (!r->released) fail_request(*r, FinishReason::kCancelled, "the engine shut down");
    }
    publish(scheduler::BatchPlan{}, StepTimings{});
    deliver();
    reqs_.clear();
}

void Engine::publish(const scheduler::BatchPlan& plan, const StepTimings& t) {
    totals_.steps = step_no_;
    if (!plan.empty()) totals_.last_step = t;
    totals_.total_time.schedule_s += t.schedule_s;
    totals_.total_time.forward_s += t.forward_s;
    totals_.total_time.sample_s += t.sample_s;
    totals_.total_time.output_s += t.output_s;
    totals_.last_prefill_tokens = plan.num_prefill_tokens;
    if (!plan.empty() && plan.num_prefill_tokens == 0) {
        totals_.decode_steps_s += t.total();
        totals_.decode_steps_tokens += plan.num_decode_seqs;
    }
    totals_.last_decode_seqs = plan.num_decode_seqs;
    totals_.queue = sched_->counts();
    totals_.blocks = blocks_->stats();
    totals_.preemptions = sched_->total_preemptions();
    totals_.peak_kv_usage = std::max(totals_.peak_kv_usage, totals_.blocks.usage);
    totals_.peak_step_batched_tokens =
        std::max(totals_.peak_step_batched_tokens, plan.num_batched_tokens);
    publish_now();
}

void Engine::publish_now() {
    totals_.knobs = sched_->knobs();
    totals_.kv = pool_->config();
    totals_.block_size = pool_->block_size();
    totals_.num_kv_blocks = pool_->num_blocks();
    totals_.kv_pool_bytes = pool_->total_bytes();
    auto snap = std::make_shared<const EngineStats>(totals_);
    std::lock_guard<std::mutex> lock(pub_mu_);
    snapshot_ = std::move(snap);
}

void Engine::deliver() { outbox_.deliver(); }

}  // namespace pagoda::engine
