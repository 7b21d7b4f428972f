// Engine::step and its phases, in the order they run: intake, plan, build batch, forward,
// sample, emit, publish, deliver. Engine thread only.
#include <algorithm>
#include <bit>

#include "base/check.h"
#include "base/log.h"
#include "engine/engine.h"

namespace pagoda::engine {

namespace {
double seconds(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}
}  // namespace

void Engine::step() {
    apply_intake();
    if (all_released()) {  // publish what cancels and rejections changed, then tell their streams
        publish(scheduler::BatchPlan{}, StepTimings{});
        deliver();
        drop_released();
        return;
    }
    const auto t0 = Clock::now();
    ++step_no_;
    // Plan.
    if (cfg_.spec.enabled()) propose_drafts();
    scheduler::BatchPlan& plan = plan_;  // capacity kept across steps
    sched_->schedule(t0, plan);
    queued_estimate_.store(int64_t(sched_->waiting().size()));
    handle_timeouts(plan);
    note_admissions(plan);
    if (plan.empty()) {
        // Nothing can run (blocked admissions): wait; timeouts get their snapshot first.
        if (!outbox_.empty()) {
            publish(plan, StepTimings{});
            deliver();
        }
        drop_released();
        std::unique_lock<std::mutex> lock(intake_->mu);
        intake_->cv.wait_for(lock, std::chrono::milliseconds(1));
        return;
    }
    // Build the batch and run the forward pass.
    for (const auto& c : plan.copies) pool_->copy_block(c.src, c.dst);
    build_batch(plan, t0);
    const auto t1 = Clock::now();
    const Status fst = model_->forward(batch_, kvcache::KvView(*pool_), logits_, &device_tokens_);
    const auto t2 = Clock::now();
    if (!fst.ok()) return fail_step(plan, {seconds(t0, t1), seconds(t1, t2), 0, 0}, fst.error());
    if (cfg_.on_forward) cfg_.on_forward(batch_, seconds(t1, t2));
    prefetch_step_state(plan);
    verify_drafts(plan);
    sched_->on_step_done(plan);
    totals_.prompt_tokens += plan.num_prefill_tokens;
    // Sample, then append, check stops, detokenize and queue the events.
    std::vector<SampledToken>& sampled = sampled_;  // capacity kept across steps
    sampled.clear();
    sample_rows(plan, sampled);
    const auto t3 = Clock::now();
    totals_.generation_tokens += int64_t(sampled.size());
    const auto& stepped =
        stepped_requests(plan, {seconds(t0, t1), seconds(t1, t2), seconds(t2, t3)});
    emit(sampled);
    const auto t4 = Clock::now();
    add_output_time(stepped, seconds(t3, t4));
    // Publish first, so a consumer that sees its last event also sees its blocks freed.
    record_step(plan, {seconds(t0, t1), seconds(t1, t2), seconds(t2, t3), seconds(t3, t4)});
    deliver();
    drop_released();
}

// A forward pass that failed: its requests end with the error.
void Engine::fail_step(const scheduler::BatchPlan& plan, const StepTimings& t, const Error& e) {
    log_warn("forward_failed step={} error=\"{}\"", step_no_, e.message);
    for (const auto& x : plan.seqs) {
        auto it = by_seq_.find(x.id);
        if (it != by_seq_.end() && !it->second.req->released) {
            fail_request(*it->second.req, FinishReason::kError, e.message);
        }
    }
    publish(plan, t);
    deliver();
    drop_released();
}

// ---------------------------------------------------------------------------------------
// Intake

void Engine::apply_intake() {
    std::deque<std::pair<std::shared_ptr<RequestStream>, Request>> pending;
    std::vector<uint64_t> cancels;
    std::vector<std::pair<RuntimeKnobs, std::promise<Status>>> knobs;
    std::optional<kvcache::KvCacheConfig> relayout;
    std::promise<Result<RelayoutReport>> relayout_done;
    {
        std::lock_guard<std::mutex> lock(intake_->mu);
        pending.swap(intake_->pending);
        cancels.swap(intake_->cancels);
        knobs.swap(intake_->knobs);
        if (intake_->relayout) {
            relayout.swap(intake_->relayout);
            relayout_done = std::move(intake_->relayout_done);
        }
    }
    for (auto& [k, done] : knobs) {
        Status st = apply_knobs(k);
        publish_now();  // before set_knobs() returns, readers see the outcome
        done.set_value(std::move(st));
    }
    if (relayout) relayout_done.set_value(apply_relayout(*relayout));
    for (auto& [stream, request] : pending) admit(std::move(stream), std::move(request));
    for (uint64_t id : cancels) {
        for (auto& r : reqs_) {
            if (r->id == id && !r->released) fail_request(*r, FinishReason::kCancelled, "");
        }
    }
}

Status Engine::apply_knobs(const RuntimeKnobs& k) {
    const RuntimeKnobs old = sched_->knobs();
    const Status st = sched_->set_knobs(k);
    if (!st.ok()) {
        log_warn("knobs_refused error=\"{}\"", st.error().message);
        return st;
    }
    log_info(
        "knobs_changed max_num_seqs={}->{} max_num_batched_tokens={}->{} "
        "long_prefill_token_threshold={}->{} max_waiting_requests={}->{} "
        "max_waiting_tokens={}->{}",
        old.max_num_seqs, k.max_num_seqs, old.max_num_batched_tokens, k.max_num_batched_tokens,
        old.long_prefill_token_threshold, k.long_prefill_token_threshold, old.max_waiting_requests,
        k.max_waiting_requests, old.max_waiting_tokens, k.max_waiting_tokens);
    return ok_status();
}

void Engine::admit(std::shared_ptr<RequestStream> stream, Request request) {
    auto r = std::make_unique<LiveRequest>();
    r->id = stream->id();
    r->stream = std::move(stream);
    r->req = std::move(request);
    r->t.arrival = *r->req.arrival;
    r->usage.prompt_tokens = int64_t(r->req.prompt_ids.size());
    const SamplingParams& sp = r->req.sampling;
    if (!sp.ignore_eos) r->ends = end_tokens_;
    r->ends.insert(r->ends.end(), sp.stop_token_ids.begin(), sp.stop_token_ids.end());
    r->samples.resize(size_t(sp.n));
    r->remaining = sp.n;
    for (int i = 0; i < sp.n; ++i) {
        Sample& c = r->samples[size_t(i)];
        c.sampler = std::make_unique<Sampler>(sp, i);
        if (r->req.detokenize) {
            c.detok = std::make_unique<tokenizer::IncrementalDetokenizer>(
                model_->tokenizer(), tokenizer::IncrementalDetokenizer::Position::kContinuation);
            if (!sp.stop.empty()) c.stops = std::make_unique<StopMatcher>(sp.stop);
        }
    }
    start_matchers(*r);
    // Not on the simulated GPU (synthetic logits).
    r->speculate = cfg_.spec.enabled() && can_speculate(sp) && !model_->simulated();
    auto seq = std::make_unique<scheduler::Sequence>();
    seq->id = next_seq_++;
    seq->priority = r->req.priority;
    seq->tokens = r->req.prompt_ids;
    seq->max_total_tokens = int32_t(r->req.prompt_ids.size()) + sp.max_tokens;
    seq->cache_salt = r->req.cache_salt;
    seq->deadline = r->req.deadline;
    const kvcache::SeqId sid = seq->id;
    ++totals_.requests_submitted;
    reqs_.push_back(std::move(r));
    LiveRequest& live = *reqs_.back();
    seq->owner = &live;  // sample 0, as by_seq_ says
    const Status st = sched_->add(std::move(seq));
    if (!st.ok()) {
        const bool full = st.error().code == ErrorCode::kResourceExhausted;
        fail_request(live, full ? FinishReason::kRejected : FinishReason::kError,
                     st.error().message);
        return;
    }
    live.samples[0].seq = sid;
    by_seq_[sid] = {&live, 0};
}

// ---------------------------------------------------------------------------------------
// Plan and batch

void Engine::handle_timeouts(const scheduler::BatchPlan& plan) {
    for (kvcache::SeqId id : plan.timed_out) {
        auto it = by_seq_.find(id);
        if (it == by_seq_.end()) continue;
        LiveRequest& r = *it->second.req;
        Sample& c = r.samples[size_t(it->second.sample)];
        c.seq = kvcache::kNoSeq;  // the scheduler already dropped it
        by_seq_.erase(it);
        const char* why = "the request waited in the queue past its deadline";
        if (r.remaining == int(r.samples.size()) && !r.forked) {
            fail_request(r, FinishReason::kTimeout, why);  // never started: all samples
        } else {
            event_for(r, c).set_error(why);
            finish_sample(r, c, FinishReason::kTimeout, "");
        }
    }
}

void Engine::note_admissions(const scheduler::BatchPlan& plan) {
    for (kvcache::SeqId id : plan.admitted) {
        auto it = by_seq_.find(id);
        const scheduler::Sequence* seq = sched_->get(id);
        if (it == by_seq_.end() || seq == nullptr || it->second.sample != 0) continue;
        LiveRequest& r = *it->second.req;
        if (!r.t.scheduled) r.usage.cached_tokens = seq->cached_tokens;
    }
    for (const auto& p : plan.preempted) {
        auto it = by_seq_.find(p.id);
        if (it != by_seq_.end()) ++it->second.req->t.num_preemptions;
    }
}

void Engine::build_batch(const scheduler::BatchPlan& plan, Clock::time_point now) {
    batch_.token_ids.clear();
    batch_.seqs.clear();
    batch_.logits_rows.clear();
    batch_.greedy_rows.clear();
    step_refs_.clear();
    for (const auto& x : plan.seqs) {
        const scheduler::Sequence* s = x.seq;
        model::SeqSpan span;
        span.token_start = batch_.num_tokens();
        span.num_tokens = x.num_tokens;
        span.pos_start = x.pos_start;
        span.block_table = blocks_->table(x.id);
        batch_.token_ids.insert(batch_.token_ids.end(), s->tokens.begin() + x.pos_start,
                                s->tokens.begin() + x.pos_start + x.num_tokens);
        batch_.seqs.push_back(span);
        // by_seq_[x.id], kept in the sequence (no lookup); none for a sequence no request
        // owns.
        step_refs_.push_back(s->owner != nullptr ? SampleRef{static_cast<LiveRequest*>(s->owner),
                                                             int(s->owner_sample)}
                                                 : SampleRef{});
        const SampleRef& ref = step_refs_.back();
        if (x.sample) {  // a decode's drafts: every row (the last token's, then each draft's)
            for (int i = x.num_draft; i >= 0; --i)
                batch_.logits_rows.push_back(span.token_start + x.num_tokens - 1 - i);
            const bool greedy =
                x.num_draft == 0 && ref.req != nullptr && greedy_on_device(*ref.req, ref.sample);
            batch_.greedy_rows.resize(batch_.logits_rows.size(), greedy ? 1 : 0);
        }
        if (ref.req != nullptr && !ref.req->t.scheduled) {
            ref.req->t.scheduled = true;
            ref.req->t.first_scheduled = now;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Sample and emit

namespace {
template <typename T>
void prefetch_lines(const T* p, size_t bytes = sizeof(T)) {
    const char* c = reinterpret_cast<const char*>(p);
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off);
}
}  // namespace

void Engine::prefetch_step_state(const scheduler::BatchPlan& plan) const {
    const size_t n = std::min(plan.seqs.size(), step_refs_.size());
    for (size_t k = 0; k < n; ++k) {  // the sequences and requests
        prefetch_lines(plan.seqs[k].seq, 128);
        if (const LiveRequest* r = step_refs_[k].req) prefetch_lines(r);
    }
    for (size_t k = 0; k < n; ++k) {  // where tokens are appended; samples; streams
        const scheduler::Sequence* s = plan.seqs[k].seq;
        __builtin_prefetch(s->tokens.data() + s->tokens.size());
        const LiveRequest* r = step_refs_[k].req;
        if (r == nullptr) continue;
        __builtin_prefetch(r->samples.data() + step_refs_[k].sample);
        r->stream->prefetch();
    }
    for (size_t k = 0; k < n; ++k) {  // a sample's sampler and detokenizer; what was gathered
        const LiveRequest* r = step_refs_[k].req;
        if (r == nullptr || size_t(step_refs_[k].sample) >= r->samples.size()) continue;
        const Sample& c = r->samples[size_t(step_refs_[k].sample)];
        prefetch_lines(c.sampler.get(), 64);  // what a greedy step reads (Sampler)
        if (c.detok) prefetch_lines(c.detok.get());
        r->stream->prefetch_gathered();
    }
}

void Engine::sample_rows(const scheduler::BatchPlan& plan, std::vector<SampledToken>& out) {
    const size_t vocab = size_t(model_->config().vocab_size);
    size_t row = 0;
    for (size_t k = 0; k < plan.seqs.size(); ++k) {
        const scheduler::ScheduledSeq& x = plan.seqs[k];
        if (!x.sample) continue;
        const float* logits = logits_.data() + row * vocab;
        row += size_t(1 + x.num_draft);
        const SampleRef ref = step_refs_[k];
        if (ref.req == nullptr) continue;
        LiveRequest& r = *ref.req;
        if (x.num_draft > 0) {
            push_verified(x, r, ref.sample, logits, out);
            continue;
        }
        // The backend sampled this row itself (a greedy row's logits are not written).
        const bool device = batch_.greedy_rows[row - 1] != 0 && device_tokens_.size() >= row;
        const scheduler::Sequence* s = x.seq;
        std::span<const int32_t> prompt(s->tokens.data(), size_t(s->num_prompt_tokens));
        // The first sample's prompt is computed: the others fork from it and sample too.
        const bool fork = ref.sample == 0 && !r.forked && r.samples.size() > 1;
        if (fork) fork_samples(r, x.id);
        for (size_t i = 0; i < r.samples.size(); ++i) {
            if (fork ? r.samples[i].done : int(i) != ref.sample) continue;
            const std::span<const uint8_t> allowed = allowed_tokens(r, r.samples[i]);
            if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), 1) == allowed.end()) {
                out.push_back({&r, int(i), kNoAllowedToken, logits});
                continue;
            }
            const int32_t tok =
                device ? device_tokens_[row - 1]
                       : r.samples[i].sampler->sample({logits, vocab}, prompt, r.ends, allowed);
            // The row's own sequence is at hand (a fork's children have theirs).
            scheduler::Sequence* own = int(i) == ref.sample ? x.seq : nullptr;
            out.push_back(
                {.req = &r, .sample = int(i), .token = tok, .logits = logits, .seq = own});
        }
    }
}

// Whether the sample's next token is the raw row's argmax, so the device may pick it: one
// sample (n > 1 forks several from one row), no logprobs (they read the row), no grammar
// mask, and a sampler that would not reshape the row.
bool Engine::greedy_on_device(const LiveRequest& r, int sample) const {
    const Sample& c = r.samples[size_t(sample)];
    return r.samples.size() == 1 && r.req.sampling.logprobs < 0 && !c.matcher &&
           c.sampler->greedy(r.ends);
}

void Engine::fork_samples(LiveRequest& r, kvcache::SeqId parent) {
    r.forked = true;
    for (size_t i = 1; i < r.samples.size(); ++i) {
        if (r.samples[i].done) continue;
        const kvcache::SeqId child = next_seq_++;
        sched_->fork(parent, child);
        sched_->get(child)->owner_sample = int32_t(i);  // the owner is the parent's: r
        r.samples[i].seq = child;
        by_seq_[child] = {&r, int(i)};
    }
}

void Engine::emit(const std::vector<SampledToken>& sampled) {
    for (const SampledToken& s : sampled) {
        Sample& c = s.req->samples[size_t(s.sample)];
        if (c.done) continue;
        if (s.token == kNoAllowedToken) {  // the grammar's text cannot go on in this vocabulary
            if (!c.matcher->can_end()) {
                event_for(*s.req, c).set_error(
                    "no token of this model's vocabulary can continue the output's grammar");
            }
            finish_sample(*s.req, c,
                          c.matcher->can_end() ? FinishReason::kStop : FinishReason::kError, "");
            continue;
        }
        if (!s.appended && s.seq != nullptr) {
            scheduler::Scheduler::append_token(*s.seq, s.token);
        } else if (!s.appended) {
            sched_->append_token(c.seq, s.token);
        }
        emit_token(*s.req, c, s.token, s.logits, s.seq);
    }
}

void Engine::emit_token(LiveRequest& r, Sample& c, int32_t tok, const float* logits,
                        const scheduler::Sequence* seq) {
    const SamplingParams& sp = r.req.sampling;
    const auto now = Clock::now();
    c.sampler->accept(tok);
    ++c.generated;
    ++r.usage.completion_tokens;
    if (!r.t.has_token) {
        r.t.has_token = true;
        r.t.first_token = now;
    }
    Event& ev = outbox_.add(r.stream.get(), r.index_of(c), now, step_no_);
    const bool past_min = c.generated > sp.min_tokens;
    const bool eog = !sp.ignore_eos &&
                     std::find(end_tokens_.begin(), end_tokens_.end(), tok) != end_tokens_.end();
    const bool stop_id = std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), tok) !=
                         sp.stop_token_ids.end();
    if ((eog || stop_id) && past_min) {
        finish_sample(r, c, FinishReason::kStop, stop_id ? std::to_string(tok) : "");
        return;
    }
    if (!advance_grammar(r, c, tok)) return;
    ev.token_ids.push_back(tok);
    if (sp.logprobs >= 0) {
        ev.tail = true;
        ev.logprobs.push_back(
            compute_logprobs({logits, size_t(model_->config().vocab_size)}, tok, sp.logprobs));
    }
    if (c.detok) {
        std::string text = c.detok->push(tok);
        if (c.stops) {
            StopMatcher::Result m = c.stops->push(
                text, past_min ? StopMatcher::Matching::kActive : StopMatcher::Matching::kNotYet);
            ev.text = std::move(m.text);
            if (m.stop != nullptr) {
                c.detok.reset();  // nothing after the stop string is emitted
                finish_sample(r, c, FinishReason::kStop, *m.stop);
                return;
            }
        } else {
            ev.text = std::move(text);
        }
    }
    if (c.matcher && c.matcher->done() && c.matcher->can_end()) {
        finish_sample(r, c, FinishReason::kStop,
                      "");  // the grammar is complete: nothing can follow
        return;
    }
    if (seq == nullptr) seq = sched_->get(c.seq);
    const bool at_context =
        seq != nullptr && int64_t(seq->tokens.size()) + 1 >= cfg_.sched.max_model_len;
    if (c.generated >= sp.max_tokens || at_context) {
        const bool incomplete = c.matcher && !c.matcher->can_end();
        finish_sample(r, c, FinishReason::kLength,
                      incomplete ? "the output ended before its grammar was complete" : "");
    }
}

// ---------------------------------------------------------------------------------------
// Ending samples and requests

Event& Engine::event_for(LiveRequest& r, const Sample& c) {
    const int index = r.index_of(c);
    const std::span<Outbox::Entry> events = outbox_.events();
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
        if (it->first == r.stream.get() && it->second.index == index && !it->second.finish) {
            return it->second;
        }
    }
    return outbox_.add(r.stream.get(), index, Clock::now(), step_no_);
}

void Engine::finish_sample(LiveRequest& r, Sample& c, FinishReason why, std::string stop_reason) {
    PAGODA_CHECK(!c.done) << "sample finished twice";
    c.done = true;
    if (c.seq != kvcache::kNoSeq) {
        sched_->finish(c.seq);
        by_seq_.erase(c.seq);
    }
    Event& ev = event_for(r, c);
    if (c.stops) ev.text += c.stops->flush();
    if (c.detok) ev.text += c.detok->flush();
    ev.finish = why;
    ev.tail = true;
    ev.stop_reason = std::move(stop_reason);
    ++totals_.finished_by_reason[int(why)];
    if (--r.remaining == 0) {
        r.t.finished = Clock::now();
        ev.request_done = true;
        ev.usage = r.usage;
        ev.timings = r.t;
        r.released = true;
        --unfinished_;
        if (r.t.scheduled && r.req.traffic) note_finished_length(r);
    }
}

void Engine::note_finished_length(const LiveRequest& r) {
    int longest = 0;
    for (const Sample& s : r.samples) longest = std::max(longest, s.generated);
    std::lock_guard<std::mutex> lock(lengths_mu_);
    if (finished_lengths_.size() >= kMaxFinishedLengths) finished_lengths_.pop_front();
    finished_lengths_.push_back(int32_t(r.usage.prompt_tokens + longest));
}

std::vector<int32_t> Engine::take_finished_lengths() {
    std::lock_guard<std::mutex> lock(lengths_mu_);
    std::vector<int32_t> out(finished_lengths_.begin(), finished_lengths_.end());
    finished_lengths_.clear();
    return out;
}

void Engine::fail_request(LiveRequest& r, FinishReason why, const std::string& error) {
    for (Sample& c : r.samples) {
        if (c.done) continue;
        event_for(r, c).set_error(error);
        finish_sample(r, c, why, "");
    }
}

bool Engine::all_released() const {
    return std::all_of(reqs_.begin(), reqs_.end(),
                       [](const std::unique_ptr<LiveRequest>& r) { return r->released; });
}

void Engine::drop_released() {
    std::erase_if(reqs_, [](const std::unique_ptr<LiveRequest>& r) { return r->released; });
}

const std::vector<LiveRequest*>& Engine::stepped_requests(const scheduler::BatchPlan& plan,
                                                          const StepTimings& t) {
    std::vector<LiveRequest*>& out = stepped_;
    out.clear();
    double context_tokens = 0;
    for (size_t k = 0; k < plan.seqs.size(); ++k) {
        const scheduler::ScheduledSeq& x = plan.seqs[k];
        context_tokens += double(x.pos_start + x.num_tokens);
        LiveRequest* r = step_refs_[k].req;  // build_batch() filled it for this plan
        if (r == nullptr || r->last_step == step_no_) continue;
        r->last_step = step_no_;
        r->t.schedule_s += t.schedule_s;
        r->t.forward_s += t.forward_s;
        r->t.sample_s += t.sample_s;
        ++r->t.steps;
        out.push_back(r);
    }
    if (!model_->simulated()) {
        const double kv_per_token =
            double(pool_->bytes_per_block()) / double(std::max(1, pool_->block_size()));
        totals_.last_step_traffic_bytes =
            double(model_->file().bytes().size()) + context_tokens * kv_per_token;
        totals_.memory_traffic_bytes += totals_.last_step_traffic_bytes;
    }
    return out;
}

// Requests that finished in this step already have their last event in the outbox: its
// timings get the output time too.
void Engine::add_output_time(const std::vector<LiveRequest*>& stepped, double output_s) {
    for (LiveRequest* r : stepped) {
        r->t.output_s += output_s;
        if (!r->released) continue;
        for (auto& [stream, ev] : outbox_.events()) {
            if (ev.request_done && stream == r->stream.get()) ev.timings.output_s = r->t.output_s;
        }
    }
}

void Engine::record_step(const scheduler::BatchPlan& plan, const StepTimings& st) {
    const double dt = st.total();
    // The idle wake-up penalty: the first pass after a pause against passes of its size.
    const auto now = Clock::now();
    const size_t bucket = std::min<size_t>(
        forward_ema_.size() - 1, size_t(std::bit_width(unsigned(plan.num_batched_tokens))));
    double& ema = forward_ema_[bucket];
    const bool after_idle =
        last_step_end_ != Clock::time_point{} &&
        now - last_step_end_ - std::chrono::duration<double>(dt) > std::chrono::milliseconds(50);
    if (after_idle && ema > 0) step_hist_.idle_wakeup.observe(std::max(0.0, st.forward_s - ema));
    if (!after_idle) ema = ema == 0 ? st.forward_s : 0.9 * ema + 0.1 * st.forward_s;
    last_step_end_ = now;
    if (dt > 0) {
        const double tps = double(plan.num_batched_tokens) / dt;
        const double old = tokens_per_second_.load();
        tokens_per_second_.store(old == 0.0 ? tps : 0.9 * old + 0.1 * tps);
    }
    step_hist_.schedule.observe(st.schedule_s);
    step_hist_.forward.observe(st.forward_s);
    step_hist_.sample.observe(st.sample_s);
    step_hist_.output.observe(st.output_s);
    step_hist_.step.observe(dt);
    if (step_mask_s_ > 0) {
        step_hist_.grammar_mask.observe(step_mask_s_);
        totals_.grammar_mask_s += step_mask_s_;
        step_mask_s_ = 0;
    }
    publish(plan, st);
}

}  // namespace pagoda::engine
