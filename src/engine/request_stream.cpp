// RequestStream: the implementation (the contract is in engine/request_stream.h).
#include "engine/request_stream.h"

namespace pagoda::engine {

RequestStream::RequestStream(uint64_t id, std::shared_ptr<Intake> intake)
    : id_(id), intake_(std::move(intake)) {}

void RequestStream::push(Event ev) {
    std::function<void()> notify;
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

// Never waits: a zero-timeout wait_for still sleeps in the kernel once (a futex call per
// poll, which the HTTP thread did for every stream at every step).
std::optional<Event> RequestStream::try_next() {
    std::lock_guard<std::mutex> lock(mu_);
    if (events_.empty()) return std::nullopt;
    Event ev = std::move(events_.front());
    events_.pop_front();
    return ev;
}

bool RequestStream::done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_ && events_.empty();
}

void RequestStream::set_notify(std::function<void()> fn, int interval) {
    std::lock_guard<std::mutex> lock(mu_);
    notify_ = std::move(fn);
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
