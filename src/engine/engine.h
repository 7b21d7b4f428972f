#pragma once
// Engine: continuous batching over one model. One engine thread owns the scheduler, the
// block manager, the KV pool and every sequence; other threads talk to it only through
// submit() (an intake queue), RequestStream (events out, cancel in), set_knobs() and the
// published snapshots (stats(), knobs()), none of which waits for a step.
//
// Each step: drain intake and cancels, schedule, copy-on-write copies, forward, sample,
// detokenize and check stops, publish a snapshot, then push the step's events: a consumer
// that sees an event also sees the snapshot of the step that made it, on every path
// (tokens, stops, timeouts, cancels, rejections, forward errors).

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "engine/live_request.h"
#include "engine/request.h"
#include "engine/request_stream.h"
#include "engine/sampler.h"
#include "engine/speculation.h"
#include "kvcache/block_manager.h"
#include "kvcache/kv_pool.h"
#include "metrics/metrics.h"
#include "model/model.h"
#include "scheduler/scheduler.h"

namespace pagoda::engine {

using scheduler::RuntimeKnobs;

struct EngineConfig {
    kvcache::KvCacheConfig kv;
    scheduler::SchedulerConfig sched;  // sched.max_model_len 0 = the model's context length
    bool enable_prefix_caching = true;
    SpeculativeConfig
        spec;  // n-gram speculation for greedy samples (speculation.h); off by default
    // Called on the engine thread after every successful forward pass with the batch and
    // its duration (`pagoda serve --step-trace`: step times to calibrate the simulator).
    std::function<void(const model::ForwardBatch&, double forward_s)> on_forward;

    Status validate() const;
};

struct StepTimings {
    double schedule_s = 0, forward_s = 0, sample_s = 0, output_s = 0;
    double total() const { return schedule_s + forward_s + sample_s + output_s; }
};

// The engine's state as one immutable value, published after every step and after every
// applied change of knobs or KV layout (before set_knobs() or relayout() return): readers
// take it whole (Engine::stats()), so the layout, the knobs and the counters they see are
// from the same moment, and a refused change never shows.
struct EngineStats {
    uint64_t steps = 0;
    scheduler::QueueCounts queue;
    kvcache::BlockStats blocks;
    kvcache::KvCacheConfig kv;  // the live layout (EngineConfig::kv is the one created with)
    int64_t block_size = 0;     // kv.block_size, as the metrics name it
    int64_t num_kv_blocks = 0;
    size_t kv_pool_bytes = 0;
    int64_t prompt_tokens = 0;      // prefill tokens computed (recompute included)
    int64_t generation_tokens = 0;  // tokens sampled
    int64_t requests_submitted = 0;
    int64_t finished_by_reason[6] = {};  // indexed by FinishReason
    int64_t preemptions = 0;             // recompute preemptions, re-layout evictions included
    int64_t relayout_evictions = 0;      // of those, sequences evicted by KV re-layouts
    double peak_kv_usage = 0.0;
    int32_t peak_step_batched_tokens = 0;  // most tokens one forward pass has run
    StepTimings last_step;
    StepTimings total_time;  // sums over all steps
    int32_t last_prefill_tokens = 0, last_decode_seqs = 0;
    double decode_steps_s = 0;        // time of steps without prefill tokens
    int64_t decode_steps_tokens = 0;  // tokens those steps generated
    RuntimeKnobs knobs;
    // Estimated bytes the forward passes read from memory: the weights once per pass and
    // the KV of every sequence's context (CPU backend; the simulated GPU models its own).
    double memory_traffic_bytes = 0;
    double last_step_traffic_bytes = 0;  // of the last forward pass (with last_step.forward_s)
    int64_t constrained_requests = 0;    // requests with a grammar (structured outputs, tools)
    double grammar_mask_s = 0;           // time spent computing token masks, summed
    // Speculative decoding (vLLM's spec_decode counters): verifies of proposed drafts, the
    // drafts proposed in them, and those accepted.
    int64_t spec_drafts = 0, spec_draft_tokens = 0, spec_accepted_tokens = 0;
};

// Per-step stage durations, observed by the engine thread after each step (seconds).
struct StepHistograms {
    StepHistograms();
    metrics::Histogram schedule, forward, sample, output, step;
    // The first forward pass after an idle pause (> 50 ms without work) minus the moving
    // average of passes of the same size: what coming back from idle cost.
    metrics::Histogram idle_wakeup;
    // Token-mask time of the constrained sequences of a step (steps that have some).
    metrics::Histogram grammar_mask;
};

// Retry-After for a full queue: the queued tokens over the recent token rate, clamped to
// [1, 60] seconds (1 before any rate was measured).
double estimate_retry_after_seconds(int64_t waiting_tokens, double tokens_per_second);

class Engine {
  public:
    static Result<std::unique_ptr<Engine>> create(model::Model& m, const EngineConfig& cfg);
    ~Engine();  // stops the loop; unfinished requests end as cancelled
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Validates and queues. Errors: kInvalidArgument (bad params), kOutOfRange (too long
    // for the context or the cache), kResourceExhausted (queue full: retry_after_seconds()).
    Result<std::shared_ptr<RequestStream>> submit(Request r);
    double retry_after_seconds() const;  // estimate_retry_after_seconds() of the last snapshot

    // Applied between two steps; returns once applied (the snapshot shows it) or refused
    // (the snapshot keeps the old knobs). Logged.
    Status set_knobs(const RuntimeKnobs& k);
    // Warmth between steps (the warm levels of control/warm_policy): when the engine runs
    // out of work it keeps the compute pool spinning for up to this long, so the next
    // request's forward pass does not pay the CPUs' wake-up; 0 (the default) parks at once
    // and costs nothing idle. Any new work ends the spin within microseconds. Thread-safe;
    // a lower value ends a spin in progress.
    void set_idle_spin(std::chrono::microseconds budget) { idle_spin_us_.store(budget.count()); }
    std::chrono::microseconds idle_spin() const {
        return std::chrono::microseconds(idle_spin_us_.load());
    }
    // Warm passes during the idle spin: every `interval` of spin the engine runs a small
    // forward pass of its own (a few tokens in a block borrowed from the KV pool), so what
    // a pass touches (weights in the host's caches and page tables, kernel code and
    // scratch) is still warm when a request comes; 0 (the default): none. A pass is
    // abandoned at the next layer when work arrives. Thread-safe.
    void set_warm_pass_interval(std::chrono::milliseconds interval) {
        warm_pass_ms_.store(interval.count());
    }
    // Wall and CPU seconds of the idle spin, warm passes included, since start.
    double idle_spin_seconds() const { return spin_s_.load(); }
    double idle_spin_cpu_seconds() const { return spin_cpu_s_.load(); }
    int64_t warm_passes() const { return warm_passes_.load(); }  // completed, since start
    int64_t warm_passes_interrupted() const { return warm_passes_interrupted_.load(); }
    // `--warmup full`: faults in the whole KV pool before ready (no page faults on first
    // use). Call before serving: it reads the pool pointer outside the engine thread, which
    // only a KV re-layout changes. False where the kernel cannot (Linux < 5.14).
    bool prefault_kv() const { return pool_->populate(); }
    Status check_knobs(const RuntimeKnobs& k) const;  // what set_knobs would refuse
    RuntimeKnobs knobs() const { return stats()->knobs; }
    std::shared_ptr<const EngineStats> stats() const;
    const StepHistograms& step_histograms() const { return step_hist_; }
    size_t kv_cache_bytes() const { return stats()->kv_pool_bytes; }
    int64_t num_unfinished() const { return unfinished_.load(); }
    // When the engine loop last went round (it wakes at least every second when idle):
    // health checks call the engine stalled when this is old.
    Clock::time_point last_heartbeat() const {
        return Clock::time_point(Clock::duration(heartbeat_.load()));
    }
    const model::Model& model() const { return *model_; }
    const EngineConfig& config() const { return cfg_; }
    int64_t num_kv_blocks() const { return stats()->num_kv_blocks; }
    int kv_block_size() const { return stats()->kv.block_size; }
    kvcache::KvCacheConfig kv_config() const { return stats()->kv; }  // config().kv: as created

    // Rebuilds the KV pool with `kv` (block size, dtype, memory) between two steps: the new
    // pool is allocated while the old one still exists, every running sequence is preempted
    // and recomputed in the new pool (greedy outputs do not change), then the old pool is
    // freed. Refused, with the old pool serving on, when the new pool cannot be allocated
    // or a live sequence could not fit it. Blocks until applied or refused.
    Result<RelayoutReport> relayout(const kvcache::KvCacheConfig& kv);
    // Context lengths (prompt + the longest sample's output, in tokens) of the requests that
    // finished since the last call, oldest first; requests that never ran are left out.
    // Keeps at most kMaxFinishedLengths between calls (the oldest are dropped).
    std::vector<int32_t> take_finished_lengths();
    static constexpr size_t kMaxFinishedLengths = 1 << 16;
    void shutdown();

  private:
    struct StepOutput;  // engine_step.cpp: a step's plan, timings and sampled tokens
    Engine() = default;
    void loop();
    void spin_while_idle();  // the idle spin of set_idle_spin(); engine thread (engine_warm.cpp)
    // One warm pass (counted as completed or interrupted). Adds its CPU to *cpu_s.
    void warm_pass(uint64_t seen_signals, double* cpu_s);
    // One step, in the order it runs (engine_step.cpp). Events produced anywhere in a step
    // go to outbox_ and reach their streams only after the step's snapshot is published.
    void step();
    void apply_intake();  // knobs, then new requests, then cancels
    Status apply_knobs(const RuntimeKnobs& k);
    Result<RelayoutReport> apply_relayout(const kvcache::KvCacheConfig& kv);  // engine_relayout.cpp
    void admit(std::shared_ptr<RequestStream> stream, Request request);
    void handle_timeouts(const scheduler::BatchPlan& plan);
    void note_admissions(const scheduler::BatchPlan& plan);
    void build_batch(const scheduler::BatchPlan& plan, Clock::time_point now);
    // After the forward pass (in which other threads had this core), the step's
    // per-sequence state is mostly out of the cache: fetched here in a few passes, each
    // following the pointers the last one brought, so the misses overlap instead of
    // coming one by one in the loops that follow.
    void prefetch_step_state(const scheduler::BatchPlan& plan) const;
    void sample_rows(const scheduler::BatchPlan& plan, std::vector<SampledToken>& out);
    bool greedy_on_device(const LiveRequest& r, int sample) const;
    // Speculative decoding (engine_speculate.cpp): drafts for the running greedy decodes
    // before the plan; after the forward, the drafts checked against the model's own choices
    // (kept up to the first miss, tokens in verified_), before the scheduler counts them.
    void propose_drafts();
    void verify_drafts(scheduler::BatchPlan& plan);
    void push_verified(const scheduler::ScheduledSeq& x, LiveRequest& r, int sample,
                       const float* logits, std::vector<SampledToken>& out);
    void fork_samples(LiveRequest& r, kvcache::SeqId parent);
    void emit(const std::vector<SampledToken>& sampled);
    // Grammar-constrained outputs (engine_grammar.cpp): the allowed tokens of a sample's
    // next position (into mask_; empty span when unconstrained; all zero: nothing can
    // follow), and the grammar advanced over an emitted token (false: finished here).
    void start_matchers(LiveRequest& r);
    std::span<const uint8_t> allowed_tokens(const LiveRequest& r, const Sample& c);
    bool advance_grammar(LiveRequest& r, Sample& c, int32_t tok);
    void record_step(const scheduler::BatchPlan& plan, const StepTimings& t);
    void fail_step(const scheduler::BatchPlan& plan, const StepTimings& t, const Error& e);
    // The requests of this step, each once, with the step's schedule, forward and sample
    // times added to theirs; and the step's memory traffic.
    // (Into stepped_, whose capacity is kept across steps.)
    const std::vector<LiveRequest*>& stepped_requests(const scheduler::BatchPlan& plan,
                                                      const StepTimings& t);
    void add_output_time(const std::vector<LiveRequest*>& stepped, double output_s);
    void publish(const scheduler::BatchPlan& plan, const StepTimings& t);
    void publish_now();  // totals_ with the live knobs and layout, between two steps
    void deliver();      // pushes outbox_ to the streams; call after publish()

    // Ending samples and requests.
    // `seq`: the sample's sequence when at hand (else looked up by id).
    void emit_token(LiveRequest& r, Sample& c, int32_t tok, const float* logits,
                    const scheduler::Sequence* seq = nullptr);
    void finish_sample(LiveRequest& r, Sample& c, FinishReason why, std::string stop_reason);
    void fail_request(LiveRequest& r, FinishReason why, const std::string& error);
    void note_finished_length(const LiveRequest& r);
    Event& event_for(LiveRequest& r, const Sample& c);  // this step's event of that sample
    void drop_released();
    bool all_released() const;  // no live request (all done or none)

    model::Model* model_ = nullptr;
    EngineConfig cfg_;
    std::unique_ptr<kvcache::KvPool> pool_;
    std::unique_ptr<kvcache::BlockManager> blocks_;
    std::unique_ptr<scheduler::Scheduler> sched_;
    std::shared_ptr<Intake> intake_;
    std::thread thread_;

    // Engine-thread state.
    std::vector<std::unique_ptr<LiveRequest>> reqs_;        // live requests
    std::unordered_map<kvcache::SeqId, SampleRef> by_seq_;  // scheduler sequence -> sample
    Outbox outbox_;  // this step's events (requests live until drop_released(), after deliver())
    kvcache::SeqId next_seq_{1};
    uint64_t step_no_ = 0;
    model::ForwardBatch batch_;
    std::vector<float> logits_;
    std::vector<int32_t> device_tokens_;  // per logits row, when the backend samples on device
    std::vector<SampledToken> sampled_;   // this step's tokens (step()'s scratch)
    std::vector<LiveRequest*> stepped_;   // this step's requests (stepped_requests())
    scheduler::BatchPlan plan_;           // this step's plan (step()'s scratch)
    // by_seq_ of each of the step's plan.seqs, looked up once (build_batch); req null: none.
    std::vector<SampleRef> step_refs_;
    std::vector<int32_t> end_tokens_;
    EngineStats totals_;
    std::unique_ptr<grammar::TokenTrie> trie_;  // built at the first constrained request
    std::vector<std::string> token_bytes_;      // every token's bytes (with trie_)
    std::vector<uint8_t> mask_;                 // scratch
    double step_mask_s_ = 0;                    // this step's mask time
    std::vector<int32_t> drafts_;               // scratch of propose_drafts
    std::unordered_map<kvcache::SeqId, std::vector<int32_t>> verified_;  // this step's

    // Published.
    StepHistograms step_hist_;
    mutable std::mutex pub_mu_;
    std::shared_ptr<const EngineStats> snapshot_;
    std::atomic<int64_t> unfinished_{0};
    std::atomic<Clock::rep> heartbeat_{0};
    std::atomic<int64_t> queued_estimate_{0};  // waiting + intake, for submit's fast check
    std::atomic<double> tokens_per_second_{0.0};
    std::atomic<int64_t> idle_spin_us_{0};
    std::atomic<double> spin_s_{0.0};
    std::atomic<double> spin_cpu_s_{0.0};
    std::atomic<int64_t> warm_pass_ms_{0};
    std::atomic<int64_t> warm_passes_{0};
    std::atomic<int64_t> warm_passes_interrupted_{0};
    Clock::time_point last_step_end_{};     // engine thread: for the idle wake-up penalty
    std::array<double, 16> forward_ema_{};  // engine thread: forward time by log2(tokens)
    std::mutex lengths_mu_;
    std::deque<int32_t> finished_lengths_;  // guarded by lengths_mu_
};

}  // namespace pagoda::engine
