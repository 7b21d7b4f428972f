// RequestStream: the implementation (the contract is in engine/request_stream.h).
#include "engine/request_stream.h"

namespace pagoda::engine {

RequestStream::RequestStream(uint64_t id, std::shared_ptr<Intake> intake)
    : id_(id), intake_(std::move(intake)) {}

void RequestStream::push(Event ev) {
    std::shared_ptr<const std::function<void()>> notify;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (ev.request_done) finished_ = true;
        const bool due =
            interval_ <= 1 || !notified_ || ev.finish || ev.request_done || ++held_ >= interval_;
        events_.push_back(std::move(ev));
        if (due) {
            notify = notify_;
            held_ = 0;
            notified_ = true;
        }
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
    interval_ = interval;
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
