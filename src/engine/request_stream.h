#pragma once
// RequestStream: the caller's handle on one submitted request (events out, cancel in), and
// Intake: what other threads hand the engine thread (new requests, cancels, knob changes).
// Both thread-safe; the engine thread is the only producer of events.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "engine/request.h"
#include "scheduler/scheduler.h"

namespace pagoda::engine {

class RequestStream;

// What a KV re-layout did (Engine::relayout).
struct RelayoutReport {
    int block_size = 0;
    int64_t num_blocks = 0;
    int64_t sequences = 0;         // running sequences preempted into the new pool
    int64_t recompute_tokens = 0;  // their computed tokens, to be computed again
    int64_t moved_sequences = 0;   // running sequences whose K/V was copied over instead
    int64_t copied_tokens = 0;     // their computed tokens, kept
    double pause_seconds = 0;      // engine thread time of the switch (allocation included)
};

// Guarded by `mu`; the engine thread drains it at the start of every step.
struct Intake {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::pair<std::shared_ptr<RequestStream>, Request>> pending;
    std::vector<uint64_t> cancels;
    // Knob changes to apply before the next step, in order, and where each outcome goes.
    std::vector<std::pair<scheduler::RuntimeKnobs, std::promise<Status>>> knobs;
    // A KV re-layout to apply before the next step, and where its outcome goes.
    std::optional<kvcache::KvCacheConfig> relayout;
    std::promise<Result<RelayoutReport>> relayout_done;
    bool stop = false;
    uint64_t next_id = 1;
    // Bumped by every wake(): the idle spin (engine.cpp) watches it without the lock.
    std::atomic<uint64_t> signals{0};
    void wake() {
        signals.fetch_add(1, std::memory_order_release);
        cv.notify_all();
    }
};

// The caller's side of one request: events out, cancel in. Thread-safe.
class RequestStream {
  public:
    // Blocks until an event is available; false once the last event was taken.
    bool next(Event& ev);
    // Waits at most `timeout`; nullopt on timeout (or when done and empty).
    std::optional<Event> next_for(std::chrono::milliseconds timeout);
    std::optional<Event> try_next();
    // Never waits: moves every queued event into `out` (cleared first), in order. The
    // buffers trade places, so a consumer that keeps `out` allocates nothing once warm.
    void take_all(std::vector<Event>& out);
    // Asks the engine to stop this request; its blocks are freed at the next step.
    void cancel();
    bool done() const;
    uint64_t id() const { return id_; }
    // Called (from the engine thread) when events were queued; for async consumers. With
    // `interval` N > 1 (vLLM's --stream-interval) a sample's token events are gathered N
    // at a time into one event (tokens, text and logprobs joined; Event::step_times keeps
    // each step's time) and queued, and notified, together: the first event, a finish, an
    // error and the request's last event go at once, so the first token and the end are
    // never held back.
    void set_notify(std::function<void()> fn, int interval = 1);

    // Engine side: creates the stream of request `id`, whose cancel() goes to `intake`.
    RequestStream(uint64_t id, std::shared_ptr<Intake> intake);
    // Engine side: appends one event (or gathers it, see set_notify) and wakes the consumer.
    // Takes what it keeps of `ev` (moved or copied); `ev` is left to be reset and reused.
    void push(Event& ev);
    // Engine side: asks the cache for what push() reads: the stream's own fields, then (once
    // those are in) the buffers of what it gathered.
    void prefetch() const;
    void prefetch_gathered() const;

  private:
    uint64_t id_ = 0;
    std::shared_ptr<Intake> intake_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Event> events_;  // events_[head_..] are queued
    size_t head_ = 0;
    bool finished_ = false;                                // the request_done event was pushed
    std::shared_ptr<const std::function<void()>> notify_;  // shared: a call copies no closure
    std::atomic<int> interval_{1};                         // read by push() without mu_
    // Engine thread only: the events gathered since the last queued one, and how many.
    int gathered_steps_ = 0;
    bool queued_any_ = false;
    std::optional<Event> gathered_;

    void queue(Event* first, Event* second);  // queues them (either may be null), notifies
    void queue_gathered(Event* with);         // queues gathered_ (and `with`), empties it
    Event pop_front();                        // with mu_ held, events queued
};

// A step's events, each with its request's stream (owned by the request, which lives until
// the engine has delivered them: no reference count touched per event). The slots are kept
// across steps, their buffers with them.
class Outbox {
  public:
    // A slot: the stream and the event, cache-line aligned so that what every token writes
    // (the stream and the event's first fields) takes two lines.
    struct alignas(64) Entry {
        RequestStream* first = nullptr;
        Event second;
    };
    Event& add(RequestStream* stream, int index, Clock::time_point time, uint64_t step);
    std::span<Entry> events() { return {slots_.data(), used_}; }
    bool empty() const { return used_ == 0; }
    // Pushes every event to its stream, in order, and empties the outbox.
    void deliver();

  private:
    std::vector<Entry> slots_;
    size_t used_ = 0;  // slots_[0, used_) hold this step's events
};

}  // namespace pagoda::engine
