#pragma once
// Scheduler: decides, each step, which sequences run and how many tokens each computes.
// Two passes (docs/architecture.md, "The scheduler"): capacity (can the block manager hold it?)
// then budget (tokens and sequences per step). Running decodes go first, then running prefill
// chunks, then admissions from the waiting queue in priority order (lower value first, FCFS inside
// a class). When a running sequence cannot grow, the lowest-priority, latest-arriving
// running sequence is preempted by recompute: its blocks go back to the pool (full ones
// stay in the prefix cache) and it rejoins the waiting queue.
//
// Never sees weights or text: sequences are token ids. Owned by the engine thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "kvcache/block_manager.h"
#include "settings/settings.h"

namespace pagoda::scheduler {

using kvcache::SeqId;
using Clock = std::chrono::steady_clock;

// Why a request is still waiting (one per waiting request, refreshed every step).
enum class WaitReason {
    kNew,           // arrived since the last step
    kNoFreeBlocks,  // its prompt does not fit in the free KV blocks (minus the watermark)
    kTokenBudget,   // this step's token budget is spent
    kSeqCap,        // --max-num-seqs sequences are running
    kPriority,      // a higher-priority request ahead of it is waiting
    kQueueLimit,    // refused at submit: the waiting queue is full
};
inline constexpr int kNumWaitReasons = 6;
const char* wait_reason_name(WaitReason r);

// Knobs that may change between steps without a restart.
// The step knobs (settings::is_knob): ranges, defaults and help in settings/settings.cpp.
struct RuntimeKnobs {
    int max_num_seqs = int(settings::default_int("max_num_seqs"));  // sequences per step
    int max_num_batched_tokens = int(settings::default_int("max_num_batched_tokens"));
    int long_prefill_token_threshold = int(settings::default_int("long_prefill_token_threshold"));
    int max_waiting_requests = int(settings::default_int("max_waiting_requests"));
    int64_t max_waiting_tokens = settings::default_int("max_waiting_tokens");

    Status validate() const;
    // A knob by its settings name; nullopt / false for a name that is not a knob.
    std::optional<int64_t> get(std::string_view name) const;
    bool set(std::string_view name, int64_t v);
};

struct SchedulerConfig {
    RuntimeKnobs knobs;
    bool enable_chunked_prefill = true;
    double watermark = 0.01;  // fraction of KV blocks admission keeps free for running sequences
    int max_model_len = 2048;

    Status validate() const;
};

struct Sequence {
    SeqId id = kvcache::kNoSeq;
    // Its owner's reference (the engine: the request and which of its samples), opaque here
    // and copied by fork(): the step's hot path reads it instead of a lookup by id.
    void* owner = nullptr;
    int32_t owner_sample = 0;
    int priority = 0;             // lower runs first (vLLM's convention)
    uint64_t arrival = 0;         // submission order (set by add())
    std::vector<int32_t> tokens;  // prompt, then generated tokens
    int32_t num_prompt_tokens = 0;
    int32_t max_total_tokens = 0;  // prompt + max new tokens (capacity check)
    int64_t num_computed = 0;      // tokens whose K/V are in the cache
    // Speculative tokens at the end of `tokens` (proposed, not yet verified): a decode with
    // drafts computes its last token and them in one pass (settle_drafts keeps the verified).
    int32_t num_draft = 0;
    uint64_t cache_salt = 0;
    std::optional<Clock::time_point> deadline;  // while queued

    enum class State { kWaiting, kRunning } state = State::kWaiting;
    WaitReason reason = WaitReason::kNew;
    int num_preemptions = 0;
    int64_t cached_tokens = 0;  // prompt tokens served by the prefix cache (all admissions)
    bool scheduled_once = false;
};

struct ScheduledSeq {
    SeqId id = kvcache::kNoSeq;
    // The sequence itself (no lookup by id on the step's hot path; always set): valid from
    // schedule() until the sequence finishes (finish() frees it), so for the step's forward pass,
    // on_step_done() and sampling, not after its tokens are emitted.
    Sequence* seq = nullptr;
    int32_t pos_start = 0;   // first position computed (= num_computed)
    int32_t num_tokens = 0;  // tokens computed this step
    bool sample = false;     // this chunk reaches the last known token: sample from its logits
    bool decode = false;     // one generated token (else a prefill chunk)
    int32_t num_draft = 0;   // a decode's speculative tokens among num_tokens (rows 1..)
};

struct Preemption {
    SeqId id = kvcache::kNoSeq;
    std::string reason;
};

struct BatchPlan {
    std::vector<ScheduledSeq> seqs;          // in running order
    std::vector<kvcache::BlockCopy> copies;  // to perform before the forward
    std::vector<Preemption> preempted;
    std::vector<SeqId> timed_out;  // left the waiting queue past their deadline
    std::vector<SeqId> admitted;   // left the waiting queue this step
    int32_t num_batched_tokens = 0;
    int32_t num_prefill_tokens = 0;
    int32_t num_decode_seqs = 0;
    int32_t num_draft_tokens = 0;  // speculative tokens verified with the decodes

    bool empty() const { return seqs.empty(); }
    void clear() {  // empty, the vectors' capacity kept
        seqs.clear();
        copies.clear();
        preempted.clear();
        timed_out.clear();
        admitted.clear();
        num_batched_tokens = num_prefill_tokens = num_decode_seqs = num_draft_tokens = 0;
    }
};

struct QueueCounts {
    int64_t running = 0, waiting = 0, waiting_tokens = 0;
    int64_t by_reason[kNumWaitReasons] = {};
};

class Scheduler {
  public:
    Scheduler(const SchedulerConfig& cfg, kvcache::BlockManager& blocks);

    // Enqueues a sequence. kResourceExhausted when the waiting queue is full (retry later);
    // kInvalidArgument/kOutOfRange when it can never run (longer than the context or the
    // whole KV cache, or than the token budget with chunked prefill off).
    Status add(std::unique_ptr<Sequence> seq);

    BatchPlan schedule(Clock::time_point now);
    // The same into `plan`, emptied first (its vectors keep their capacity: no allocation
    // per step once warm).
    void schedule(Clock::time_point now, BatchPlan& plan);
    // After the forward: scheduled tokens are computed; full blocks join the prefix cache.
    void on_step_done(const BatchPlan& plan);
    void append_token(SeqId id, int32_t token);
    // The same for a sequence of this step's plan (ScheduledSeq::seq): no lookup.
    static void append_token(Sequence& s, int32_t token) { s.tokens.push_back(token); }
    // Speculative decoding. propose: `drafts` follow the sequence's tokens until verified
    // (a running decode without drafts only). settle_drafts, after the forward and before
    // on_step_done: the first `accepted` drafts of `x` were the model's own tokens and stay,
    // the rest are dropped, and only the verified rows count as computed.
    void propose(SeqId id, std::span<const int32_t> drafts);
    void settle_drafts(ScheduledSeq& x, int32_t accepted);
    // A running copy of `parent` (n > 1 samples) sharing its blocks.
    void fork(SeqId parent, SeqId child);
    // Removes the sequence wherever it is and frees its blocks. No-op if unknown.
    void finish(SeqId id);

    Sequence* get(SeqId id);
    bool has(SeqId id) const { return seqs_.count(id) != 0; }
    QueueCounts counts() const;
    const std::vector<Sequence*>& running() const { return running_; }
    const std::vector<Sequence*>& waiting() const { return waiting_; }
    const RuntimeKnobs& knobs() const { return cfg_.knobs; }
    Status set_knobs(const RuntimeKnobs& k);
    const SchedulerConfig& config() const { return cfg_; }
    int64_t total_preemptions() const { return preemptions_; }

    // KV re-layout, in this order: check_fits (every live sequence fits a pool of that
    // shape), preempt_all (every running sequence back to waiting, its blocks freed, to be
    // recomputed), rebind (to the new pool's block manager; no sequence may hold blocks).
    struct Evicted {
        int64_t sequences = 0;
        int64_t recompute_tokens = 0;  // tokens whose K/V must be computed again
    };
    Status check_fits(int block_size, int64_t num_blocks) const;
    Evicted preempt_all();
    // The re-layout that keeps computed tokens: each running sequence gets blocks in `to`
    // for its computed tokens and `copy(from_table, to_table, tokens)` moves their K/V; one
    // that does not fit there is preempted for recompute as preempt_all does. Then binds
    // `to` (rebind). Returns the sequences and tokens moved, and what was evicted.
    struct Moved {
        int64_t sequences = 0, tokens = 0;
        Evicted evicted;
    };
    Moved move_all(kvcache::BlockManager& to,
                   const std::function<void(const kvcache::BlockTable& from,
                                            const kvcache::BlockTable& to, int64_t tokens)>& copy);
    void rebind(kvcache::BlockManager& blocks);

  private:
    struct Step;  // one schedule() call's plan and budget (scheduler.cpp)
    // schedule()'s phases, in order.
    void drop_timed_out(BatchPlan& plan, Clock::time_point now);
    void schedule_running(Step& st);
    void admit_waiting(Step& st);
    static bool before(const Sequence* a, const Sequence* b);  // scheduling order
    void insert_sorted(std::vector<Sequence*>& q, Sequence* s);
    void remove_from(std::vector<Sequence*>& q, Sequence* s);
    void preempt(Sequence* victim, BatchPlan& plan, const std::string& why);
    // Back to waiting for recompute: blocks freed, computed count reset, counted.
    void requeue(Sequence* victim);
    static void drop_drafts(Sequence* s);  // unverified drafts off the end of its tokens
    int64_t watermark_blocks() const;

    SchedulerConfig cfg_;
    kvcache::BlockManager* blocks_;  // never null; rebind() swaps it during a KV re-layout
    std::map<SeqId, std::unique_ptr<Sequence>> seqs_;
    std::vector<Sequence*> waiting_;  // sorted by (priority, arrival, id)
    std::vector<Sequence*> running_;  // sorted by (priority, arrival, id)
    int64_t waiting_tokens_ = 0;
    uint64_t next_arrival_ = 0;
    int64_t preemptions_ = 0;
};

}  // namespace pagoda::scheduler
