#pragma once
// Engine: continuous batching over one model. One engine thread owns the scheduler, the
// block manager, the KV pool and every sequence; other threads talk to it only through
// submit() (an intake queue), RequestStream (events out, cancel in), set_knobs() and the
// published snapshots (stats(), knobs()), none of which waits for a step.
//
// Each step: drain intake and cancels, schedule, copy-on-write copies, forward, sample,
// detokenize and check stops, push events, publish a snapshot (ARCHITECTURE.md §4).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "engine/sampler.h"
#include "kvcache/block_manager.h"
#include "kvcache/kv_pool.h"
#include "metrics/metrics.h"
#include "model/model.h"
#include "scheduler/scheduler.h"

namespace pagoda::engine {

using Clock = std::chrono::steady_clock;
using scheduler::RuntimeKnobs;

struct EngineConfig {
    kvcache::KvCacheConfig kv;
    scheduler::SchedulerConfig sched;  // sched.max_model_len 0 = the model's context length
    bool enable_prefix_caching = true;

    Status validate() const;
};

struct Request {
    std::vector<int32_t> prompt_ids;
    SamplingParams sampling;
    int priority = 0;                           // lower runs first
    std::optional<Clock::time_point> deadline;  // finish with "timeout" if still queued then
    uint64_t cache_salt = 0;                    // prefix-cache isolation between tenants
    bool detokenize = true;                     // produce text deltas and apply stop strings
    std::optional<Clock::time_point> arrival;   // default: submit time
};

enum class FinishReason { kStop, kLength, kCancelled, kRejected, kTimeout, kError };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", ...

struct Usage {
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;  // over all n samples
    int64_t cached_tokens = 0;      // prompt tokens served by the prefix cache
};

struct RequestTimings {
    Clock::time_point arrival, first_scheduled, first_token, finished;
    bool scheduled = false, has_token = false;
    int num_preemptions = 0;
    double queue_seconds() const;  // arrival -> first scheduled
    double ttft_seconds() const;   // arrival -> first token
    double e2e_seconds() const;    // arrival -> finished
};

// One step's output for one of a request's n samples. The last event of a request has
// request_done set, with usage and timings.
struct Event {
    int index = 0;                       // which of the n samples
    std::vector<int32_t> token_ids;      // new tokens (stop/end tokens are not included)
    std::string text;                    // new text (held back while a stop string may be forming)
    std::vector<TokenLogprob> logprobs;  // one per token in token_ids when logprobs >= 0
    Clock::time_point time;              // when the tokens were produced
    uint64_t step = 0;                   // engine step that produced it
    std::optional<FinishReason> finish;  // this sample is complete
    std::string stop_reason;             // the stop string or token id that ended it
    std::string error;                   // for kRejected / kError
    bool request_done = false;
    Usage usage;
    RequestTimings timings;
};

class Engine;
struct Intake;

// The caller's side of one request: events out, cancel in. Thread-safe.
class RequestStream {
  public:
    // Blocks until an event is available; false once the last event was taken.
    bool next(Event& ev);
    // Waits at most `timeout`; nullopt on timeout (or when done and empty).
    std::optional<Event> next_for(std::chrono::milliseconds timeout);
    std::optional<Event> try_next();
    // Asks the engine to stop this request; its blocks are freed at the next step.
    void cancel();
    bool done() const;
    uint64_t id() const { return id_; }
    // Called (from the engine thread) whenever events were pushed; for async consumers.
    void set_notify(std::function<void()> fn);

  private:
    friend class Engine;
    void push(Event ev);
    uint64_t id_ = 0;
    std::shared_ptr<Intake> intake_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Event> events_;
    bool finished_ = false;  // the request_done event was pushed
    std::function<void()> notify_;
};

struct StepTimings {
    double schedule_s = 0, forward_s = 0, sample_s = 0, output_s = 0;
    double total() const { return schedule_s + forward_s + sample_s + output_s; }
};

// A snapshot published after every step.
struct EngineStats {
    uint64_t steps = 0;
    scheduler::QueueCounts queue;
    kvcache::BlockStats blocks;
    int64_t block_size = 0;
    int64_t prompt_tokens = 0;      // prefill tokens computed (recompute included)
    int64_t generation_tokens = 0;  // tokens sampled
    int64_t requests_submitted = 0;
    int64_t finished_by_reason[6] = {};  // indexed by FinishReason
    int64_t preemptions = 0;
    double peak_kv_usage = 0.0;
    StepTimings last_step;
    StepTimings total_time;  // sums over all steps
    int32_t last_prefill_tokens = 0, last_decode_seqs = 0;
    double decode_steps_s = 0;        // time of steps without prefill tokens
    int64_t decode_steps_tokens = 0;  // tokens those steps generated
    RuntimeKnobs knobs;
};

// Per-step stage durations, observed by the engine thread after each step (seconds).
struct StepHistograms {
    StepHistograms();
    metrics::Histogram schedule, forward, sample, output, step;
};

class Engine {
  public:
    static Result<std::unique_ptr<Engine>> create(model::Model& m, const EngineConfig& cfg);
    ~Engine();  // stops the loop; unfinished requests end as cancelled
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Validates and queues. Errors: kInvalidArgument (bad params), kOutOfRange (too long
    // for the context or the cache), kResourceExhausted (queue full: retry_after_seconds()).
    Result<std::shared_ptr<RequestStream>> submit(Request r);
    double retry_after_seconds() const;

    Status set_knobs(const RuntimeKnobs& k);  // applied between steps; logged
    RuntimeKnobs knobs() const;
    std::shared_ptr<const EngineStats> stats() const;
    const StepHistograms& step_histograms() const { return step_hist_; }
    size_t kv_cache_bytes() const { return pool_->total_bytes(); }
    int64_t num_unfinished() const { return unfinished_.load(); }
    // When the engine loop last went round (it wakes at least every second when idle):
    // health checks call the engine stalled when this is old.
    Clock::time_point last_heartbeat() const {
        return Clock::time_point(Clock::duration(heartbeat_.load()));
    }
    const model::Model& model() const { return *model_; }
    const EngineConfig& config() const { return cfg_; }
    int64_t num_kv_blocks() const { return pool_->num_blocks(); }
    void shutdown();

  private:
    Engine() = default;
    struct Choice;
    struct Req;
    void loop();
    void step();
    void apply_intake();
    void finish_choice(Req& r, Choice& c, FinishReason why, std::string stop_reason,
                       std::vector<Event>& out);
    void fail_request(Req& r, FinishReason why, const std::string& error);
    void emit_token(Req& r, Choice& c, int32_t tok, const float* logits, std::vector<Event>& out);
    void publish(const scheduler::BatchPlan& plan, const StepTimings& t);
    void release(Req& r);

    model::Model* model_ = nullptr;
    EngineConfig cfg_;
    std::unique_ptr<kvcache::KvPool> pool_;
    std::unique_ptr<kvcache::BlockManager> blocks_;
    std::unique_ptr<scheduler::Scheduler> sched_;
    std::shared_ptr<Intake> intake_;
    std::thread thread_;

    // Engine-thread state.
    std::vector<std::unique_ptr<Req>> reqs_;                           // live requests
    std::unordered_map<kvcache::SeqId, std::pair<Req*, int>> by_seq_;  // seq -> (request, choice)
    kvcache::SeqId next_seq_ = 1;
    uint64_t step_no_ = 0;
    model::ForwardBatch batch_;
    std::vector<float> logits_;
    std::vector<int32_t> end_tokens_;
    EngineStats totals_;

    // Published.
    StepHistograms step_hist_;
    mutable std::mutex pub_mu_;
    std::shared_ptr<const EngineStats> snapshot_;
    std::atomic<int64_t> unfinished_{0};
    std::atomic<Clock::rep> heartbeat_{0};
    std::atomic<int64_t> queued_estimate_{0};  // waiting + intake, for submit's fast check
    std::atomic<double> tokens_per_second_{0.0};
};

}  // namespace pagoda::engine
