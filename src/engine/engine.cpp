#include "engine/engine.h"

#include <algorithm>
#include <unordered_map>

#include "base/check.h"
#include "base/log.h"
#include "kernels/cpu/ops.h"
#include "tokenizer/detokenizer.h"

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
      step({1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0}) {}

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

// ---------------------------------------------------------------------------------------
// Intake and streams

struct Intake {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::pair<std::shared_ptr<RequestStream>, Request>> pending;
    std::vector<uint64_t> cancels;
    std::optional<RuntimeKnobs> knobs;  // to apply before the next step
    RuntimeKnobs current;               // what the loop runs with
    bool stop = false;
    uint64_t next_id = 1;
};

void RequestStream::push(Event ev) {
    std::function<void()> notify;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (ev.request_done) finished_ = true;
        events_.push_back(std::move(ev));
        notify = notify_;
    }
    cv_.notify_all();
    if (notify) notify();
}

bool RequestStream::next(Event& ev) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !events_.empty() || finished_; });
    if (events_.empty()) return false;
    ev = std::move(events_.front());
    events_.pop_front();
    return true;
}

std::optional<Event> RequestStream::next_for(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !events_.empty() || finished_; });
    if (events_.empty()) return std::nullopt;
    Event ev = std::move(events_.front());
    events_.pop_front();
    return ev;
}

std::optional<Event> RequestStream::try_next() { return next_for(std::chrono::milliseconds(0)); }

bool RequestStream::done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_ && events_.empty();
}

void RequestStream::set_notify(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    notify_ = std::move(fn);
}

void RequestStream::cancel() {
    if (!intake_) return;
    {
        std::lock_guard<std::mutex> lock(intake_->mu);
        intake_->cancels.push_back(id_);
    }
    intake_->cv.notify_all();
}

// ---------------------------------------------------------------------------------------
// Engine-thread request state

struct Engine::Choice {
    kvcache::SeqId seq = 0;  // 0 until forked (n > 1)
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<tokenizer::IncrementalDetokenizer> detok;
    std::string held;  // decoded text not yet emitted (a stop string may be forming)
    int generated = 0;
    bool done = false;
};

struct Engine::Req {
    uint64_t id = 0;
    std::shared_ptr<RequestStream> stream;
    Request req;
    std::vector<Choice> choices;
    RequestTimings t;
    Usage usage;
    std::vector<int32_t>
        ends;  // tokens masked before min_tokens: EOS/EOT (unless ignore_eos) and stop_token_ids
    int remaining = 0;
    bool forked = false;
    bool released = false;
};

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
    e->intake_->current = e->cfg_.sched.knobs;
    const auto& vocab = m.tokenizer().vocab();
    if (vocab.eos != tokenizer::kNoToken) e->end_tokens_.push_back(vocab.eos);
    if (vocab.eot != tokenizer::kNoToken && vocab.eot != vocab.eos)
        e->end_tokens_.push_back(vocab.eot);
    e->totals_.block_size = e->pool_->block_size();
    e->totals_.knobs = e->cfg_.sched.knobs;
    e->totals_.blocks = e->blocks_->stats();
    e->snapshot_ = std::make_shared<EngineStats>(e->totals_);
    log_info(
        "engine: {} KV blocks of {} tokens ({:.1f} MiB, {}), max_model_len {}, max_num_seqs {}, "
        "max_num_batched_tokens {}, prefix caching {}, chunked prefill {}",
        e->pool_->num_blocks(), e->pool_->block_size(), double(e->pool_->total_bytes()) / (1 << 20),
        kvcache::kv_dtype_name(e->pool_->dtype()), e->cfg_.sched.max_model_len,
        e->cfg_.sched.knobs.max_num_seqs, e->cfg_.sched.knobs.max_num_batched_tokens,
        e->cfg_.enable_prefix_caching ? "on" : "off",
        e->cfg_.sched.enable_chunked_prefill ? "on" : "off");
    e->heartbeat_.store(Clock::now().time_since_epoch().count());
    e->thread_ = std::thread([raw = e.get()] {
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
    intake_->cv.notify_all();
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
    const int64_t total = int64_t(r.prompt_ids.size()) + r.sampling.max_tokens;
    const int max_len = cfg_.sched.max_model_len;
    if (int64_t(r.prompt_ids.size()) >= max_len) {
        return make_error(ErrorCode::kOutOfRange,
                          "the prompt has {} tokens but the context length of {} (max_model_len) "
                          "must leave room for at "
                          "least one new token",
                          r.prompt_ids.size(), max_len);
    }
    if (total > max_len) {
        // As vLLM: max_tokens is capped to what the context leaves.
        r.sampling.max_tokens = int(max_len - int64_t(r.prompt_ids.size()));
        r.sampling.min_tokens = std::min(r.sampling.min_tokens, r.sampling.max_tokens);
    }
    const int64_t need_blocks =
        blocks_->blocks_for(int64_t(r.prompt_ids.size()) + r.sampling.max_tokens);
    if (need_blocks > pool_->num_blocks()) {
        return make_error(ErrorCode::kOutOfRange,
                          "prompt of {} tokens plus max_tokens {} needs {} KV blocks but the cache "
                          "holds {}; lower "
                          "max_tokens or raise --kv-cache-memory",
                          r.prompt_ids.size(), r.sampling.max_tokens, need_blocks,
                          pool_->num_blocks());
    }
    if (!r.arrival) r.arrival = Clock::now();
    auto stream = std::shared_ptr<RequestStream>(new RequestStream());
    stream->intake_ = intake_;
    {
        std::lock_guard<std::mutex> lock(intake_->mu);
        if (intake_->stop)
            return make_error(ErrorCode::kResourceExhausted, "the engine is shutting down");
        if (queued_estimate_.load() >= intake_->current.max_waiting_requests) {
            return make_error(ErrorCode::kResourceExhausted,
                              "the waiting queue is full ({} requests); retry in {:.0f} s",
                              queued_estimate_.load(), retry_after_seconds());
        }
        stream->id_ = intake_->next_id++;
        intake_->pending.emplace_back(stream, std::move(r));
        ++queued_estimate_;
        ++unfinished_;
    }
    intake_->cv.notify_all();
    return stream;
}

double Engine::retry_after_seconds() const {
    const double tps = tokens_per_second_.load();
    const auto snap = stats();
    if (tps <= 0.0) return 1.0;
    return std::clamp(double(snap->queue.waiting_tokens) / tps, 1.0, 60.0);
}

Status Engine::set_knobs(const RuntimeKnobs& k) {
    PAGODA_TRY(k.validate());
    if (!cfg_.sched.enable_chunked_prefill && k.max_num_batched_tokens < cfg_.sched.max_model_len) {
        return make_error(
            ErrorCode::kInvalidArgument,
            "with chunked prefill off, max_num_batched_tokens ({}) must be >= max_model_len ({})",
            k.max_num_batched_tokens, cfg_.sched.max_model_len);
    }
    {
        std::lock_guard<std::mutex> lock(intake_->mu);
        intake_->knobs = k;
    }
    intake_->cv.notify_all();
    return ok_status();
}

RuntimeKnobs Engine::knobs() const {
    std::lock_guard<std::mutex> lock(intake_->mu);
    return intake_->knobs ? *intake_->knobs : intake_->current;
}

std::shared_ptr<const EngineStats> Engine::stats() const {
    std::lock_guard<std::mutex> lock(pub_mu_);
    return snapshot_;
}

// ---------------------------------------------------------------------------------------
// The loop

void Engine::loop() {
    for (;;) {
        heartbeat_.store(Clock::now().time_since_epoch().count());
        {
            std::unique_lock<std::mutex> lock(intake_->mu);
            if (intake_->stop) break;
            if (reqs_.empty()) {
                const bool work = intake_->cv.wait_for(lock, std::chrono::seconds(1), [&] {
                    return intake_->stop || !intake_->pending.empty() ||
                           !intake_->cancels.empty() || intake_->knobs;
                });
                if (intake_->stop) break;
                if (!work) continue;  // idle: only the heartbeat
            }
        }
        step();
    }
    // Shutting down: whatever is left ends as cancelled.
    apply_intake();
    for (auto& r : reqs_) fail_request(*r, FinishReason::kCancelled, "the engine shut down");
    reqs_.clear();
}

void Engine::fail_request(Req& r, FinishReason why, const std::string& error) {
    std::vector<Event> out;
    for (Choice& c : r.choices) {
        if (c.done) continue;
        Event ev;
        ev.index = int(&c - r.choices.data());
        ev.time = Clock::now();
        ev.step = step_no_;
        ev.error = error;
        out.push_back(std::move(ev));
        finish_choice(r, c, why, "", out);
    }
    for (Event& ev : out) r.stream->push(std::move(ev));
}

void Engine::apply_intake() {
    std::deque<std::pair<std::shared_ptr<RequestStream>, Request>> pending;
    std::vector<uint64_t> cancels;
    std::optional<RuntimeKnobs> knobs;
    {
        std::lock_guard<std::mutex> lock(intake_->mu);
        pending.swap(intake_->pending);
        cancels.swap(intake_->cancels);
        knobs.swap(intake_->knobs);
        if (knobs) intake_->current = *knobs;
    }
    if (knobs) {
        const RuntimeKnobs old = sched_->knobs();
        const Status st = sched_->set_knobs(*knobs);
        if (st.ok()) {
            log_info(
                "knobs changed: max_num_seqs {} -> {}, max_num_batched_tokens {} -> {}, "
                "long_prefill_token_threshold {} -> {}, max_waiting_requests {} -> {}, "
                "max_waiting_tokens {} -> {}",
                old.max_num_seqs, knobs->max_num_seqs, old.max_num_batched_tokens,
                knobs->max_num_batched_tokens, old.long_prefill_token_threshold,
                knobs->long_prefill_token_threshold, old.max_waiting_requests,
                knobs->max_waiting_requests, old.max_waiting_tokens, knobs->max_waiting_tokens);
        } else {
            log_warn("knob change refused: {}", st.error().message);
        }
    }
    for (auto& [stream, request] : pending) {
        auto r = std::make_unique<Req>();
        r->id = stream->id();
        r->stream = stream;
        r->req = std::move(request);
        r->t.arrival = *r->req.arrival;
        r->usage.prompt_tokens = int64_t(r->req.prompt_ids.size());
        const SamplingParams& sp = r->req.sampling;
        if (!sp.ignore_eos) r->ends = end_tokens_;
        r->ends.insert(r->ends.end(), sp.stop_token_ids.begin(), sp.stop_token_ids.end());
        r->choices.resize(size_t(sp.n));
        r->remaining = sp.n;
        for (int i = 0; i < sp.n; ++i) {
            Choice& c = r->choices[size_t(i)];
            c.sampler = std::make_unique<Sampler>(sp, i);
            if (r->req.detokenize)
                c.detok =
                    std::make_unique<tokenizer::IncrementalDetokenizer>(model_->tokenizer(), false);
        }
        auto seq = std::make_unique<scheduler::Sequence>();
        seq->id = next_seq_++;
        seq->priority = r->req.priority;
        seq->tokens = r->req.prompt_ids;
        seq->max_total_tokens = int32_t(r->req.prompt_ids.size()) + sp.max_tokens;
        seq->cache_salt = r->req.cache_salt;
        seq->deadline = r->req.deadline;
        const kvcache::SeqId sid = seq->id;
        ++totals_.requests_submitted;
        const Status st = sched_->add(std::move(seq));
        if (!st.ok()) {
            fail_request(*r,
                         st.error().code == ErrorCode::kResourceExhausted ? FinishReason::kRejected
                                                                          : FinishReason::kError,
                         st.error().message);
            continue;
        }
        r->choices[0].seq = sid;
        by_seq_[sid] = {r.get(), 0};
        reqs_.push_back(std::move(r));
    }
    for (uint64_t id : cancels) {
        for (auto& r : reqs_) {
            if (r->id == id && !r->released) fail_request(*r, FinishReason::kCancelled, "");
        }
    }
    std::erase_if(reqs_, [](const std::unique_ptr<Req>& r) { return r->released; });
}

void Engine::release(Req& r) {
    r.released = true;
    --unfinished_;
}

void Engine::finish_choice(Req& r, Choice& c, FinishReason why, std::string stop_reason,
                           std::vector<Event>& out) {
    PAGODA_CHECK(!c.done) << "choice finished twice";
    c.done = true;
    if (c.seq != 0) {
        sched_->finish(c.seq);
        by_seq_.erase(c.seq);
    }
    const int index = int(&c - r.choices.data());
    Event* ev = nullptr;
    for (auto& e : out) {
        if (e.index == index && !e.finish) ev = &e;
    }
    if (ev == nullptr) {
        out.emplace_back();
        ev = &out.back();
        ev->index = index;
        ev->time = Clock::now();
        ev->step = step_no_;
    }
    if (c.detok) ev->text += c.held + c.detok->flush();
    c.held.clear();
    ev->finish = why;
    ev->stop_reason = std::move(stop_reason);
    ++totals_.finished_by_reason[int(why)];
    if (--r.remaining == 0) {
        r.t.finished = Clock::now();
        ev->request_done = true;
        ev->usage = r.usage;
        ev->timings = r.t;
        release(r);
    }
}

void Engine::emit_token(Req& r, Choice& c, int32_t tok, const float* logits,
                        std::vector<Event>& out) {
    const SamplingParams& sp = r.req.sampling;
    const auto now = Clock::now();
    c.sampler->accept(tok);
    ++c.generated;
    ++r.usage.completion_tokens;
    if (!r.t.has_token) {
        r.t.has_token = true;
        r.t.first_token = now;
    }
    out.emplace_back();
    Event& ev = out.back();
    ev.index = int(&c - r.choices.data());
    ev.time = now;
    ev.step = step_no_;

    const bool past_min = c.generated > sp.min_tokens;
    const bool eog = !sp.ignore_eos &&
                     std::find(end_tokens_.begin(), end_tokens_.end(), tok) != end_tokens_.end();
    const bool stop_id = std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), tok) !=
                         sp.stop_token_ids.end();
    if ((eog || stop_id) && past_min) {
        finish_choice(r, c, FinishReason::kStop, stop_id ? std::to_string(tok) : "", out);
        return;
    }
    ev.token_ids.push_back(tok);
    if (sp.logprobs >= 0)
        ev.logprobs.push_back(
            compute_logprobs({logits, size_t(model_->config().vocab_size)}, tok, sp.logprobs));
    if (c.detok) {
        c.held += c.detok->push(tok);
        size_t keep = 0;  // bytes of held text to hold back
        if (!sp.stop.empty()) {
            size_t best = std::string::npos;
            const std::string* which = nullptr;
            if (past_min) {
                for (const auto& s : sp.stop) {
                    const size_t p = c.held.find(s);
                    if (p != std::string::npos && p < best) {
                        best = p;
                        which = &s;
                    }
                }
            }
            if (which != nullptr) {
                ev.text = c.held.substr(0, best);
                c.held.clear();
                const std::string why = *which;
                c.detok.reset();  // nothing after the stop string is emitted
                finish_choice(r, c, FinishReason::kStop, why, out);
                return;
            }
            for (const auto& s : sp.stop) {
                for (size_t k = std::min(s.size() - 1, c.held.size()); k > keep; --k) {
                    if (c.held.compare(c.held.size() - k, k, s, 0, k) == 0) {
                        keep = k;
                        break;
                    }
                }
            }
        }
        ev.text = c.held.substr(0, c.held.size() - keep);
        c.held.erase(0, c.held.size() - keep);
    }
    const scheduler::Sequence* seq = sched_->get(c.seq);
    const bool at_context =
        seq != nullptr && int64_t(seq->tokens.size()) + 1 >= cfg_.sched.max_model_len;
    if (c.generated >= sp.max_tokens || at_context)
        finish_choice(r, c, FinishReason::kLength, "", out);
}

void Engine::step() {
    apply_intake();
    if (reqs_.empty()) {  // idle: publish what cancels and rejections changed
        publish(scheduler::BatchPlan{}, StepTimings{});
        return;
    }
    const auto t0 = Clock::now();
    ++step_no_;
    scheduler::BatchPlan plan = sched_->schedule(t0);
    queued_estimate_.store(int64_t(sched_->waiting().size()));

    std::vector<Event> out;
    for (kvcache::SeqId id : plan.timed_out) {
        auto it = by_seq_.find(id);
        if (it == by_seq_.end()) continue;
        Req& r = *it->second.first;
        Choice& c = r.choices[size_t(it->second.second)];
        c.seq = 0;  // the scheduler already dropped it
        by_seq_.erase(it);
        if (r.remaining == int(r.choices.size()) && !r.forked) {
            // Never started: the whole request times out.
            std::vector<Event> evs;
            for (Choice& o : r.choices) {
                if (!o.done) {
                    evs.emplace_back();
                    evs.back().index = int(&o - r.choices.data());
                    evs.back().error = "the request waited in the queue past its deadline";
                    finish_choice(r, o, FinishReason::kTimeout, "", evs);
                }
            }
            for (auto& e : evs) r.stream->push(std::move(e));
        } else {
            std::vector<Event> evs;
            finish_choice(r, c, FinishReason::kTimeout, "", evs);
            for (auto& e : evs) r.stream->push(std::move(e));
        }
    }
    for (kvcache::SeqId id : plan.admitted) {
        auto it = by_seq_.find(id);
        const scheduler::Sequence* seq = sched_->get(id);
        if (it == by_seq_.end() || seq == nullptr || it->second.second != 0) continue;
        Req& r = *it->second.first;
        if (!r.t.scheduled) r.usage.cached_tokens = seq->cached_tokens;
    }
    for (const auto& p : plan.preempted) {
        auto it = by_seq_.find(p.id);
        if (it != by_seq_.end()) ++it->second.first->t.num_preemptions;
    }
    if (plan.empty()) {
        std::erase_if(reqs_, [](const std::unique_ptr<Req>& r) { return r->released; });
        std::unique_lock<std::mutex> lock(intake_->mu);
        intake_->cv.wait_for(lock, std::chrono::milliseconds(1));
        return;
    }
    for (const auto& c : plan.copies) pool_->copy_block(c.src, c.dst);

    // The forward batch.
    batch_.token_ids.clear();
    batch_.seqs.clear();
    batch_.logits_rows.clear();
    for (const auto& x : plan.seqs) {
        const scheduler::Sequence* s = sched_->get(x.id);
        PAGODA_CHECK(s != nullptr) << "scheduled sequence " << x.id << " is unknown";
        model::SeqSpan span;
        span.token_start = batch_.num_tokens();
        span.num_tokens = x.num_tokens;
        span.pos_start = x.pos_start;
        span.block_table = blocks_->table(x.id);
        batch_.token_ids.insert(batch_.token_ids.end(), s->tokens.begin() + x.pos_start,
                                s->tokens.begin() + x.pos_start + x.num_tokens);
        batch_.seqs.push_back(span);
        if (x.sample) batch_.logits_rows.push_back(span.token_start + x.num_tokens - 1);
        auto it = by_seq_.find(x.id);
        if (it != by_seq_.end() && !it->second.first->t.scheduled) {
            it->second.first->t.scheduled = true;
            it->second.first->t.first_scheduled = t0;
        }
    }
    const auto t1 = Clock::now();
    const Status fst = model_->forward(batch_, kvcache::KvView(*pool_), logits_);
    const auto t2 = Clock::now();
    if (!fst.ok()) {
        log_warn("forward failed at step {}: {}", step_no_, fst.error().message);
        for (const auto& x : plan.seqs) {
            auto it = by_seq_.find(x.id);
            if (it != by_seq_.end())
                fail_request(*it->second.first, FinishReason::kError, fst.error().message);
        }
        std::erase_if(reqs_, [](const std::unique_ptr<Req>& r) { return r->released; });
        return;
    }
    sched_->on_step_done(plan);
    totals_.prompt_tokens += plan.num_prefill_tokens;

    // Sample every row that asked for logits.
    const size_t vocab = size_t(model_->config().vocab_size);
    struct Sampled {
        Req* req;
        int choice;
        int32_t token;
        const float* row;
    };
    std::vector<Sampled> sampled;
    size_t row = 0;
    for (const auto& x : plan.seqs) {
        if (!x.sample) continue;
        const float* logits = logits_.data() + row * vocab;
        ++row;
        auto it = by_seq_.find(x.id);
        if (it == by_seq_.end()) continue;
        Req& r = *it->second.first;
        const int ci = it->second.second;
        const scheduler::Sequence* s = sched_->get(x.id);
        std::span<const int32_t> prompt(s->tokens.data(), size_t(s->num_prompt_tokens));
        const std::vector<int32_t>& ends = r.ends;
        if (ci == 0 && !r.forked && r.choices.size() > 1) {
            // The prompt is computed: the other samples share its blocks from here on.
            r.forked = true;
            for (size_t i = 1; i < r.choices.size(); ++i) {
                if (r.choices[i].done) continue;
                const kvcache::SeqId child = next_seq_++;
                sched_->fork(x.id, child);
                r.choices[i].seq = child;
                by_seq_[child] = {&r, int(i)};
            }
            for (size_t i = 0; i < r.choices.size(); ++i) {
                if (r.choices[i].done) continue;
                const int32_t tok = r.choices[i].sampler->sample({logits, vocab}, prompt, ends);
                sampled.push_back({&r, int(i), tok, logits});
            }
        } else {
            const int32_t tok =
                r.choices[size_t(ci)].sampler->sample({logits, vocab}, prompt, ends);
            sampled.push_back({&r, ci, tok, logits});
        }
    }
    const auto t3 = Clock::now();
    totals_.generation_tokens += int64_t(sampled.size());

    // Append, check stops, detokenize, emit.
    std::unordered_map<Req*, std::vector<Event>> events;
    for (const Sampled& s : sampled) {
        Choice& c = s.req->choices[size_t(s.choice)];
        if (c.done) continue;
        sched_->append_token(c.seq, s.token);
        emit_token(*s.req, c, s.token, s.row, events[s.req]);
    }
    const auto t4 = Clock::now();

    StepTimings st{seconds(t0, t1), seconds(t1, t2), seconds(t2, t3), seconds(t3, t4)};
    const double dt = st.total();
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
    // Publish first, so a consumer that sees its last event also sees its blocks freed.
    publish(plan, st);
    for (auto& [r, evs] : events) {
        for (auto& e : evs) r->stream->push(std::move(e));
    }
    std::erase_if(reqs_, [](const std::unique_ptr<Req>& r) { return r->released; });
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
    totals_.knobs = sched_->knobs();
    auto snap = std::make_shared<const EngineStats>(totals_);
    std::lock_guard<std::mutex> lock(pub_mu_);
    snapshot_ = std::move(snap);
}

}  // namespace pagoda::engine
