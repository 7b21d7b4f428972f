#pragma once
// RequestLog: the scheduler chain and business layer per request. Each finished generation
// request leaves a record of its stages (queue wait, prefill, decode; the engine steps'
// scheduling, forward, sampling and output handling; the I/O thread's formatting; the
// network write) kept in a ring of the latest 4096 for GET /admin/requests/slowest, and
// feeds the per-stage histogram, the per-length-class TTFT/ITL/E2E histograms and the
// request and error counters of /metrics. Thread-safe.

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/request.h"
#include "metrics/metrics.h"

namespace pagoda::server {

// Length classes by context (prompt + generated tokens): one boundary gives short | long,
// two give short | medium | long. Default: long from 1024 tokens.
struct LengthClasses {
    std::vector<int64_t> boundaries = {1024};
    std::string classify(int64_t tokens) const;
    std::vector<std::string> names() const;
};

enum class ErrorKind { kRejected, kTimeout, kInternal };
inline constexpr int kNumErrorKinds = 3;
const char* error_kind_name(ErrorKind k);

struct RequestRecord {
    std::string id, endpoint, finish_reason;
    std::string request_id, route;  // X-Request-Id (passed through a router) and the path
    int status = 200;
    int64_t prompt_tokens = 0, completion_tokens = 0;
    int64_t finished_unix_ms = 0;
    engine::RequestTimings timings;  // of the slowest of its prompts
    double http_output_s = 0;        // I/O thread: events to JSON/SSE
    double network_write_s = 0;      // writing to the socket
    std::string length_class;
    nlohmann::json to_json() const;
};

class RequestLog {
  public:
    explicit RequestLog(LengthClasses classes = {});
    void add(RequestRecord r, const std::vector<double>& itl);
    // One `access` log line per request (on by default; --disable-access-log), naming this
    // replica; a finished generation writes its own from add().
    void set_access_log(bool on, std::string replica);
    bool access_log() const { return access_log_; }
    const std::string& replica() const { return replica_; }
    void count_request() { ++requests_; }
    void count_error(ErrorKind k) { ++errors_[int(k)]; }
    // The n slowest of the recent requests by end-to-end latency, slowest first.
    nlohmann::json slowest(int n) const;
    const LengthClasses& classes() const { return classes_; }
    void write(metrics::TextWriter& w, const metrics::Labels& model) const;

    static constexpr size_t kCapacity = 4096;
    // The stages of pagoda_request_stage_seconds{stage}.
    static constexpr std::array<const char*, 9> kStages = {
        "queue",  "prefill", "decode",      "schedule",     "forward",
        "sample", "output",  "http_output", "network_write"};

  private:
    bool access_log_ = true;
    std::string replica_;
    LengthClasses classes_;
    std::vector<std::unique_ptr<metrics::Histogram>> stage_;  // by kStages
    // By class: TTFT, ITL, E2E.
    std::vector<std::unique_ptr<metrics::Histogram>> ttft_, itl_, e2e_;
    std::atomic<int64_t> requests_{0};
    std::atomic<int64_t> errors_[kNumErrorKinds] = {};
    mutable std::mutex mu_;
    std::deque<RequestRecord> recent_;  // guarded by mu_
};

std::vector<double> latency_buckets();

}  // namespace pagoda::server
