// Scheduler: the implementation (the contract is in scheduler/scheduler.h).
#include "scheduler/scheduler.h"

#include <algorithm>

#include "base/check.h"
#include "base/log.h"
#include "scheduler/limits.h"

namespace pagoda::scheduler {

const char* wait_reason_name(WaitReason r) {
    switch (r) {
        case WaitReason::kNew: return "new";
        case WaitReason::kNoFreeBlocks: return "no_free_blocks";
        case WaitReason::kTokenBudget: return "token_budget";
        case WaitReason::kSeqCap: return "max_num_seqs";
        case WaitReason::kPriority: return "priority";
        case WaitReason::kQueueLimit: return "queue_limit";
    }
    return "?";
}

namespace {

// Each knob's field, by its settings name (settings::is_knob).
template <typename Knobs, typename F>
bool with_knob(Knobs& k, std::string_view name, F&& f) {
    if (name == "max_num_seqs") return f(k.max_num_seqs), true;
    if (name == "max_num_batched_tokens") return f(k.max_num_batched_tokens), true;
    if (name == "long_prefill_token_threshold") return f(k.long_prefill_token_threshold), true;
    if (name == "max_waiting_requests") return f(k.max_waiting_requests), true;
    if (name == "max_waiting_tokens") return f(k.max_waiting_tokens), true;
    return false;
}

}  // namespace

Status RuntimeKnobs::validate() const {
    for (const settings::Spec& s : settings::all()) {
        if (!settings::is_knob(s)) continue;
        const std::optional<int64_t> v = get(s.name);
        if (!v) return make_error(ErrorCode::kInternal, "knob '{}' has no field", s.name);
        PAGODA_TRY(settings::check(s, *v));
    }
    return ok_status();
}

std::optional<int64_t> RuntimeKnobs::get(std::string_view name) const {
    int64_t out = 0;
    if (!with_knob(*this, name, [&](const auto& field) { out = int64_t(field); })) {
        return std::nullopt;
    }
    return out;
}

bool RuntimeKnobs::set(std::string_view name, int64_t v) {
    return with_knob(*this, name, [&](auto& field) { field = decltype(+field)(v); });
}

Status SchedulerConfig::validate() const {
    PAGODA_TRY(knobs.validate());
    if (!(watermark >= 0.0 && watermark < 1.0)) {
        return make_error(ErrorCode::kInvalidArgument, "watermark must be in [0, 1), got {}",
                          watermark);
    }
    if (max_model_len < 1)
        return make_error(ErrorCode::kInvalidArgument, "max_model_len must be >= 1");
    return check_chunked_prefill(knobs, enable_chunked_prefill, max_model_len);
}

Scheduler::Scheduler(const SchedulerConfig& cfg, kvcache::BlockManager& blocks)
    : cfg_(cfg), blocks_(&blocks) {}

void Scheduler::requeue(Sequence* victim) {
    drop_drafts(victim);
    blocks_->free(victim->id);
    remove_from(running_, victim);
    victim->state = Sequence::State::kWaiting;
    victim->reason = WaitReason::kNoFreeBlocks;
    victim->num_computed = 0;
    ++victim->num_preemptions;
    ++preemptions_;
    insert_sorted(waiting_, victim);
    waiting_tokens_ += int64_t(victim->tokens.size());
}

Scheduler::Evicted Scheduler::preempt_all() {
    Evicted out;
    while (!running_.empty()) {
        Sequence* victim = running_.back();
        out.sequences += 1;
        out.recompute_tokens += victim->num_computed;
        requeue(victim);
    }
    return out;
}

Scheduler::Moved Scheduler::move_all(
    kvcache::BlockManager& to,
    const std::function<void(const kvcache::BlockTable&, const kvcache::BlockTable&, int64_t)>&
        copy) {
    Moved out;
    std::vector<Sequence*> moved, evict;
    for (Sequence* s : running_) {
        const int64_t n = s->num_computed;
        if (n <= 0 || !blocks_->has(s->id)) {
            evict.push_back(s);
            continue;
        }
        const std::span<const int32_t> toks(s->tokens.data(), size_t(n));
        // Nothing is published in `to` before every sequence has moved: no prefix hits.
        const kvcache::AllocationCheck c = to.check_allocate(toks, s->cache_salt, 0);
        if (!c.fits || c.cached_tokens > 0) {
            evict.push_back(s);
            continue;
        }
        to.allocate(s->id, toks, s->cache_salt);
        copy(blocks_->table(s->id), to.table(s->id), n);
        blocks_->free(s->id);
        moved.push_back(s);
        out.sequences += 1;
        out.tokens += n;
    }
    for (Sequence* v : evict) {
        out.evicted.sequences += 1;
        out.evicted.recompute_tokens += v->num_computed;
        requeue(v);
    }
    rebind(to);
    for (Sequence* s : moved) {
        to.publish(s->id, std::span<const int32_t>(s->tokens.data(), size_t(s->num_computed)),
                   s->num_computed);
    }
    return out;
}

void Scheduler::rebind(kvcache::BlockManager& blocks) {
    for (const auto& [id, s] : seqs_) {
        PAGODA_CHECK(!blocks_->has(id)) << "sequence " << id << " still holds blocks";
    }
    blocks_ = &blocks;
}

Status Scheduler::check_fits(int block_size, int64_t num_blocks) const {
    for (const auto& [id, s] : seqs_) {
        const int64_t total = std::max<int64_t>(s->max_total_tokens, int64_t(s->tokens.size()));
        if (Status st = check_kv_fit(total, block_size, num_blocks); !st.ok()) {
            return make_error(ErrorCode::kResourceExhausted, "live sequence {}: {}", id,
                              st.error().message);
        }
    }
    return ok_status();
}

bool Scheduler::before(const Sequence* a, const Sequence* b) {
    if (a->priority != b->priority) return a->priority < b->priority;
    if (a->arrival != b->arrival) return a->arrival < b->arrival;
    return a->id < b->id;
}

void Scheduler::insert_sorted(std::vector<Sequence*>& q, Sequence* s) {
    q.insert(std::upper_bound(q.begin(), q.end(), s, before), s);
}

void Scheduler::remove_from(std::vector<Sequence*>& q, Sequence* s) {
    auto it = std::find(q.begin(), q.end(), s);
    if (it != q.end()) q.erase(it);
}

int64_t Scheduler::watermark_blocks() const {
    return int64_t(cfg_.watermark * double(blocks_->num_total()));
}

Status Scheduler::set_knobs(const RuntimeKnobs& k) {
    PAGODA_TRY(k.validate());
    PAGODA_TRY(check_chunked_prefill(k, cfg_.enable_chunked_prefill, cfg_.max_model_len));
    cfg_.knobs = k;
    return ok_status();
}

Status Scheduler::add(std::unique_ptr<Sequence> seq) {
    PAGODA_CHECK(seq != nullptr) << "null sequence";
    const int64_t n = int64_t(seq->tokens.size());
    if (n == 0) return make_error(ErrorCode::kInvalidArgument, "the prompt is empty (no tokens)");
    if (has(seq->id))
        return make_error(ErrorCode::kInvalidArgument, "sequence id {} is already in use", seq->id);
    const int64_t max_total = std::max<int64_t>(seq->max_total_tokens, n);
    const LengthCheck len =
        check_context_length(n, max_total - n, MaxTokens::kGiven, cfg_.max_model_len);
    if (len.verdict != LengthVerdict::kFits)
        return make_error(ErrorCode::kOutOfRange, "{}", len.message);
    PAGODA_TRY(check_kv_fit(max_total, blocks_->block_size(), blocks_->num_total()));
    if (int64_t(waiting_.size()) >= cfg_.knobs.max_waiting_requests) {
        return make_error(ErrorCode::kResourceExhausted,
                          "the waiting queue is full ({} requests, limit {})", waiting_.size(),
                          cfg_.knobs.max_waiting_requests);
    }
    if (waiting_tokens_ + n > cfg_.knobs.max_waiting_tokens) {
        return make_error(
            ErrorCode::kResourceExhausted,
            "the waiting queue is full ({} prompt tokens queued, limit {}, this prompt {})",
            waiting_tokens_, cfg_.knobs.max_waiting_tokens, n);
    }
    seq->arrival = next_arrival_++;
    seq->state = Sequence::State::kWaiting;
    seq->reason = WaitReason::kNew;
    seq->num_computed = 0;
    if (seq->num_prompt_tokens == 0) seq->num_prompt_tokens = int32_t(n);
    Sequence* s = seq.get();
    seqs_.emplace(s->id, std::move(seq));
    insert_sorted(waiting_, s);
    waiting_tokens_ += n;
    return ok_status();
}

void Scheduler::preempt(Sequence* victim, BatchPlan& plan, const std::string& why) {
    // Unschedule it if it was already part of this step.
    auto it = std::find_if(plan.seqs.begin(), plan.seqs.end(),
                           [&](const ScheduledSeq& x) { return x.id == victim->id; });
    if (it != plan.seqs.end()) {
        plan.num_batched_tokens -= it->num_tokens;
        if (it->decode) {
            --plan.num_decode_seqs;
            plan.num_draft_tokens -= it->num_draft;
        } else {
            plan.num_prefill_tokens -= it->num_tokens;
        }
        plan.seqs.erase(it);
        const auto& table = blocks_->table(victim->id);
        std::erase_if(plan.copies, [&](const kvcache::BlockCopy& c) {
            return std::find(table.begin(), table.end(), c.dst.value()) != table.end();
        });
    }
    requeue(victim);
    plan.preempted.push_back({victim->id, why});
    log_info("preempted seq={} priority={} tokens={} preemption={} reason=\"{}\"", victim->id,
             victim->priority, victim->tokens.size(), victim->num_preemptions, why);
}

// One schedule() call: the plan being built and what is left of the step's budget.
struct Scheduler::Step {
    BatchPlan& plan;
    const RuntimeKnobs& k;
    int64_t budget;
    size_t seq_cap;

    // The tokens a sequence computes now: what remains, within the budget (and the
    // long-prefill cap for prompts).
    int64_t chunk_for(int64_t remaining, bool prefill) const {
        int64_t n = std::min(remaining, budget);
        if (prefill && k.long_prefill_token_threshold > 0)
            n = std::min<int64_t>(n, k.long_prefill_token_threshold);
        return n;
    }
    void push(Sequence* s, int64_t n, bool decode) {
        ScheduledSeq x;
        x.id = s->id;
        x.seq = s;
        x.pos_start = int32_t(s->num_computed);
        x.num_tokens = int32_t(n);
        x.sample = decode || s->num_computed + n == int64_t(s->tokens.size());
        x.decode = decode;
        if (decode) x.num_draft = int32_t(n - 1);
        plan.seqs.push_back(x);
        plan.num_batched_tokens += int32_t(n);
        if (decode) {
            ++plan.num_decode_seqs;
            plan.num_draft_tokens += x.num_draft;
        } else {
            plan.num_prefill_tokens += int32_t(n);
        }
        budget -= n;
    }
};

BatchPlan Scheduler::schedule(Clock::time_point now) {
    BatchPlan plan;
    schedule(now, plan);
    return plan;
}

void Scheduler::schedule(Clock::time_point now, BatchPlan& plan) {
    plan.clear();
    Step st{plan, cfg_.knobs, cfg_.knobs.max_num_batched_tokens, size_t(cfg_.knobs.max_num_seqs)};
    drop_timed_out(plan, now);
    schedule_running(st);
    admit_waiting(st);
}

// Queued past the deadline: out.
void Scheduler::drop_timed_out(BatchPlan& plan, Clock::time_point now) {
    for (size_t i = 0; i < waiting_.size();) {
        Sequence* s = waiting_[i];
        if (s->deadline && now > *s->deadline) {
            plan.timed_out.push_back(s->id);
            waiting_tokens_ -= int64_t(s->tokens.size());
            waiting_.erase(waiting_.begin() + ptrdiff_t(i));
            blocks_->free(s->id);
            seqs_.erase(s->id);
        } else {
            ++i;
        }
    }
}

// Running sequences: decodes first, then prefill chunks; a sequence that cannot grow
// preempts the lowest-priority, latest-arriving running one.
void Scheduler::schedule_running(Step& st) {
    for (int pass = 0; pass < 2; ++pass) {
        const bool decode_pass = pass == 0;
        for (size_t i = 0; i < running_.size(); ++i) {
            Sequence* s = running_[i];
            const int64_t remaining = int64_t(s->tokens.size()) - s->num_computed;
            const bool is_decode =
                remaining - s->num_draft == 1 && s->num_computed >= s->num_prompt_tokens;
            if (is_decode != decode_pass || remaining <= 0) continue;
            if (st.plan.seqs.size() >= st.seq_cap || st.budget <= 0) continue;
            const int64_t n = st.chunk_for(remaining, !is_decode);
            if (!cfg_.enable_chunked_prefill && n < remaining) continue;
            const int64_t need_tokens = s->num_computed + n;
            bool self_preempted = false;
            while (!blocks_->can_grow(s->id, need_tokens, s->num_computed)) {
                Sequence* victim = running_.back();
                const std::string why = fmt::format(
                    "sequence {} needs {} more KV blocks to grow to {} tokens; {} available", s->id,
                    blocks_->blocks_to_grow(s->id, need_tokens, s->num_computed), need_tokens,
                    blocks_->num_available());
                preempt(victim, st.plan, why);
                if (victim == s) {
                    self_preempted = true;
                    break;
                }
            }
            if (self_preempted) break;  // s was the last running sequence
            blocks_->grow(s->id, need_tokens, s->num_computed, &st.plan.copies);
            st.push(s, n, is_decode);
        }
    }
}

// Admissions, in priority order; the first that cannot go blocks those behind it.
void Scheduler::admit_waiting(Step& st) {
    bool blocked = !st.plan.preempted.empty();
    WaitReason block_reason = WaitReason::kNoFreeBlocks;
    int block_priority = waiting_.empty() ? 0 : waiting_.front()->priority;
    for (size_t i = 0; i < waiting_.size();) {
        Sequence* s = waiting_[i];
        if (blocked) {
            s->reason = s->priority != block_priority ? WaitReason::kPriority : block_reason;
            ++i;
            continue;
        }
        std::optional<WaitReason> r;
        kvcache::AllocationCheck check;
        int64_t n = 0;
        if (running_.size() >= st.seq_cap || st.plan.seqs.size() >= st.seq_cap) {
            r = WaitReason::kSeqCap;
        } else if (st.budget <= 0) {
            r = WaitReason::kTokenBudget;
        } else {
            check = blocks_->check_allocate(s->tokens, s->cache_salt,
                                            running_.empty() ? 0 : watermark_blocks());
            if (!check.fits) {
                r = WaitReason::kNoFreeBlocks;
            } else {
                const int64_t remaining = int64_t(s->tokens.size()) - check.cached_tokens;
                n = st.chunk_for(remaining, true);
                if (!cfg_.enable_chunked_prefill && n < remaining) r = WaitReason::kTokenBudget;
            }
        }
        if (r) {
            blocked = true;
            block_reason = *r;
            block_priority = s->priority;
            s->reason = *r;
            ++i;
            continue;
        }
        const int32_t cached = blocks_->allocate(s->id, s->tokens, s->cache_salt);
        PAGODA_CHECK(cached == check.cached_tokens) << cached << " vs " << check.cached_tokens;
        s->num_computed = cached;
        s->cached_tokens += cached;
        s->state = Sequence::State::kRunning;
        waiting_tokens_ -= int64_t(s->tokens.size());
        waiting_.erase(waiting_.begin() + ptrdiff_t(i));
        insert_sorted(running_, s);
        st.plan.admitted.push_back(s->id);
        st.push(s, n, false);
    }
}

void Scheduler::on_step_done(const BatchPlan& plan) {
    const int64_t bs = blocks_->block_size();
    for (const ScheduledSeq& x : plan.seqs) {
        Sequence* s = x.seq;
        if (s->state != Sequence::State::kRunning) continue;
        const int64_t before = s->num_computed;
        s->num_computed = x.pos_start + x.num_tokens;
        s->scheduled_once = true;
        // Blocks are published as they fill: a step that filled none has nothing to add
        // (most decode steps; the block manager's lookup is per sequence).
        if (s->num_computed / bs != before / bs) {
            blocks_->publish(s->id, s->tokens, s->num_computed);
        }
    }
}

void Scheduler::append_token(SeqId id, int32_t token) {
    Sequence* s = get(id);
    PAGODA_CHECK(s != nullptr) << "unknown sequence " << id;
    s->tokens.push_back(token);
}

void Scheduler::propose(SeqId id, std::span<const int32_t> drafts) {
    Sequence* s = get(id);
    PAGODA_CHECK(s != nullptr && s->state == Sequence::State::kRunning && s->num_draft == 0 &&
                 int64_t(s->tokens.size()) - s->num_computed == 1)
        << "drafts proposed for sequence " << id << ", which is not a running decode";
    s->tokens.insert(s->tokens.end(), drafts.begin(), drafts.end());
    s->num_draft = int32_t(drafts.size());
}

void Scheduler::settle_drafts(ScheduledSeq& x, int32_t accepted) {
    Sequence* s = get(x.id);
    PAGODA_CHECK(s != nullptr && accepted >= 0 && accepted <= x.num_draft)
        << "settle_drafts: " << accepted << " of " << x.num_draft << " drafts";
    s->tokens.resize(size_t(x.pos_start + 1 + accepted));
    s->num_draft = 0;
    x.num_tokens = 1 + accepted;
}

void Scheduler::drop_drafts(Sequence* s) {
    s->tokens.resize(s->tokens.size() - size_t(s->num_draft));
    s->num_draft = 0;
}

void Scheduler::fork(SeqId parent, SeqId child) {
    Sequence* p = get(parent);
    PAGODA_CHECK(p != nullptr && p->state == Sequence::State::kRunning)
        << "fork of a sequence that is not running";
    PAGODA_CHECK(!has(child)) << "sequence id " << child << " is already in use";
    auto c = std::make_unique<Sequence>(*p);
    c->id = child;
    c->num_preemptions = 0;
    c->cached_tokens = 0;
    blocks_->fork(parent, child);
    Sequence* raw = c.get();
    seqs_.emplace(child, std::move(c));
    insert_sorted(running_, raw);
}

void Scheduler::finish(SeqId id) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) return;
    Sequence* s = it->second.get();
    if (s->state == Sequence::State::kWaiting) {
        remove_from(waiting_, s);
        waiting_tokens_ -= int64_t(s->tokens.size());
    } else {
        remove_from(running_, s);
    }
    blocks_->free(id);
    seqs_.erase(it);
}

Sequence* Scheduler::get(SeqId id) {
    auto it = seqs_.find(id);
    return it == seqs_.end() ? nullptr : it->second.get();
}

QueueCounts Scheduler::counts() const {
    QueueCounts c;
    c.running = int64_t(running_.size());
    c.waiting = int64_t(waiting_.size());
    c.waiting_tokens = waiting_tokens_;
    for (const Sequence* s : waiting_) ++c.by_reason[int(s->reason)];
    return c;
}

}  // namespace pagoda::scheduler
