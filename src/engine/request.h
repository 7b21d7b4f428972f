#pragma once
// The engine layer's request types: what a caller submits (Request) and what it gets back,
// one Event per step and sample, the last with usage and timings. Plain values; the server
// maps its ParsedRequest onto Request (docs/architecture.md, "One request per layer").

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace pagoda::engine {

using Clock = std::chrono::steady_clock;

struct Request {
    std::vector<int32_t> prompt_ids;
    SamplingParams sampling;
    int priority = 0;                           // lower runs first
    std::optional<Clock::time_point> deadline;  // finish with "timeout" if still queued then
    uint64_t cache_salt = 0;                    // prefix-cache isolation between tenants
    bool detokenize = true;                     // produce text deltas and apply stop strings
    std::optional<Clock::time_point> arrival;   // default: submit time
    // The last `resumed_tokens` prompt ids are output already emitted (a stream resumed on
    // this replica): a grammar-constrained request replays them before it generates.
    int32_t resumed_tokens = 0;
    // false: the engine's own warmup requests, left out of the finished-length feed (the
    // context-length statistics the block-size policy reads).
    bool traffic = true;
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
    // The engine-step stages of the steps this request took part in, summed (seconds):
    // scheduling and batch building, the forward pass, sampling, output handling.
    double schedule_s = 0, forward_s = 0, sample_s = 0, output_s = 0;
    int steps = 0;
    double queue_seconds() const;  // arrival -> first scheduled
    double ttft_seconds() const;   // arrival -> first token
    double e2e_seconds() const;    // arrival -> finished
};

// One step's output for one of a request's n samples. The last event of a request has
// request_done set, with usage and timings.
//
// Laid out for the engine's outbox, whose slots are reused step after step and start each
// step cold on a VM whose core ran other work during the forward pass: what every token
// writes is in the first two cache lines; the rest (the tail) is written only when a sample
// ends, fails or asks for logprobs, and whoever writes it sets `tail`, so that reset() and
// the gathering of plain events never touch those lines otherwise.
struct Event {
    int index = 0;  // which of the n samples
    bool request_done = false;
    bool tail = false;                   // a field after step_times may be set
    std::optional<FinishReason> finish;  // this sample is complete
    Clock::time_point time;              // when the tokens were produced
    uint64_t step = 0;                   // engine step that produced it
    std::vector<int32_t> token_ids;      // new tokens (stop/end tokens are not included)
    std::string text;                    // new text (held back while a stop string may be forming)
    // Gathered events (a stream notified every N events, RequestStream::set_notify): the
    // time of each step gathered, in order, the last being `time`; empty for one step.
    std::vector<Clock::time_point> step_times;
    // The tail.
    std::vector<TokenLogprob> logprobs;  // one per token in token_ids when logprobs >= 0
    std::string stop_reason;             // the stop string or token id that ended it
    std::string error;                   // for kRejected / kError
    Usage usage;
    RequestTimings timings;

    // A new event in this one's place, its buffers' capacity kept (the engine's outbox
    // reuses its slots, so a step's events allocate nothing once warm).
    void reset(int new_index, Clock::time_point new_time, uint64_t new_step);
    void set_error(std::string message) {
        tail = true;
        error = std::move(message);
    }
};

}  // namespace pagoda::engine
