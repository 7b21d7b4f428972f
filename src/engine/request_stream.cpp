// RequestStream: the implementation (the contract is in engine/request_stream.h).
#include "engine/request_stream.h"

#include <algorithm>

namespace pagoda::engine {

RequestStream::RequestStream(uint64_t id, std::shared_ptr<Intake> intake)
    : id_(id), intake_(std::move(intake)) {}

namespace {

// An event that only carries tokens: it can be gathered with the next of its sample.
bool plain(const Event& ev) {
    return !ev.finish && !ev.request_done &&
           (!ev.tail || (ev.error.empty() && ev.stop_reason.empty()));
}

void gather(Event& into, Event& ev) {
    into.token_ids.insert(into.token_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
    into.text += ev.text;
    if (ev.tail) {  // a plain event's tail holds logprobs at most
        into.tail = true;
        into.logprobs.insert(into.logprobs.end(), std::make_move_iterator(ev.logprobs.begin()),
                             std::make_move_iterator(ev.logprobs.end()));
    }
    if (into.step_times.empty()) into.step_times.push_back(into.time);
    into.step_times.push_back(ev.time);
    into.time = ev.time;
    into.step = ev.step;
}

}  // namespace

void RequestStream::push(Event& ev) {
    const int interval = interval_.load(std::memory_order_acquire);
    const bool gatherable = interval > 1 && queued_any_ && plain(ev);
    if (gathered_ && (gathered_->index != ev.index || !gatherable)) {
        // What was gathered goes first: with this event when it ends the sample, else
        // alone (another sample's events are gathered apart).
        queue_gathered(gatherable ? nullptr : &ev);
        if (!gatherable) return;
    }
    if (!gatherable) return queue(&ev, nullptr);
    if (!gathered_) {
        gathered_ = std::move(ev);
        gathered_->token_ids.reserve(size_t(std::min(interval, 64)));
    } else {
        gather(*gathered_, ev);
    }
    if (++gathered_steps_ >= interval) queue_gathered(nullptr);
}

void RequestStream::prefetch() const {
    const char* hot = reinterpret_cast<const char*>(&interval_);
    for (int line = 0; line < 3; ++line) __builtin_prefetch(hot + 64 * line);
}

void RequestStream::prefetch_gathered() const {
    if (!gathered_) return;
    __builtin_prefetch(gathered_->token_ids.data() + gathered_->token_ids.size());
    __builtin_prefetch(gathered_->text.data() + gathered_->text.size());
    __builtin_prefetch(gathered_->step_times.data() + gathered_->step_times.size());
}

void RequestStream::queue_gathered(Event* with) {
    queue(&*gathered_, with);
    gathered_.reset();
    gathered_steps_ = 0;
}

void RequestStream::queue(Event* first, Event* second) {
    queued_any_ = true;
    std::shared_ptr<const std::function<void()>> notify;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (Event* ev : {first, second}) {
            if (ev == nullptr) continue;
            if (ev->request_done) finished_ = true;
            events_.push_back(std::move(*ev));
        }
        notify = notify_;
    }
    cv_.notify_all();
    if (notify) (*notify)();
}

bool RequestStream::next(Event& ev) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return head_ < events_.size() || finished_; });
    if (head_ == events_.size()) return false;
    ev = pop_front();
    return true;
}

std::optional<Event> RequestStream::next_for(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return head_ < events_.size() || finished_; });
    if (head_ == events_.size()) return std::nullopt;
    return pop_front();
}

// Never waits: a zero-timeout wait_for still sleeps in the kernel once (a futex call per
// poll, which the HTTP thread did for every stream at every step).
std::optional<Event> RequestStream::try_next() {
    std::lock_guard<std::mutex> lock(mu_);
    if (head_ == events_.size()) return std::nullopt;
    return pop_front();
}

void RequestStream::take_all(std::vector<Event>& out) {
    out.clear();
    std::lock_guard<std::mutex> lock(mu_);
    if (head_ == 0) {
        out.swap(events_);
    } else {
        out.assign(std::make_move_iterator(events_.begin() + ptrdiff_t(head_)),
                   std::make_move_iterator(events_.end()));
        events_.clear();
        head_ = 0;
    }
}

// The queue is a vector read from head_: emptied (capacity kept) when drained, compacted
// when a slow reader leaves more than half of it taken.
Event RequestStream::pop_front() {
    Event ev = std::move(events_[head_++]);
    if (head_ == events_.size()) {
        events_.clear();
        head_ = 0;
    } else if (head_ >= 64 && head_ * 2 >= events_.size()) {
        events_.erase(events_.begin(), events_.begin() + ptrdiff_t(head_));
        head_ = 0;
    }
    return ev;
}

bool RequestStream::done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_ && head_ == events_.size();
}

void RequestStream::set_notify(std::function<void()> fn, int interval) {
    std::lock_guard<std::mutex> lock(mu_);
    notify_ = fn ? std::make_shared<const std::function<void()>>(std::move(fn)) : nullptr;
    interval_.store(interval, std::memory_order_release);
}

Event& Outbox::add(RequestStream* stream, int index, Clock::time_point time, uint64_t step) {
    if (used_ == slots_.size()) slots_.emplace_back();
    Entry& e = slots_[used_++];
    e.first = stream;
    e.second.reset(index, time, step);
    return e.second;
}

void Outbox::deliver() {
    for (auto& [stream, ev] : events()) stream->push(ev);
    used_ = 0;
}

void Event::reset(int new_index, Clock::time_point new_time, uint64_t new_step) {
    index = new_index;
    request_done = false;
    finish.reset();
    time = new_time;
    step = new_step;
    token_ids.clear();
    text.clear();
    step_times.clear();
    if (!tail) return;
    tail = false;
    logprobs.clear();
    stop_reason.clear();
    error.clear();
    usage = Usage{};
    timings = RequestTimings{};
}

void RequestStream::cancel() {
    if (!intake_) return;
    {
        std::lock_guard<std::mutex> lock(intake_->mu);
        intake_->cancels.push_back(id_);
    }
    intake_->wake();
}

}  // namespace pagoda::engine
