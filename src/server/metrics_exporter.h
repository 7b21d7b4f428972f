#pragma once
// ServerMetrics: the request-level metrics the server observes (TTFT, ITL, E2E, queue,
// prefill, decode, token counts, HTTP status classes, finish reasons) and the Prometheus
// exposition of /metrics, which adds the engine's published snapshot and the process's
// resources. Never waits for an engine step. Thread-safe (histograms and atomics).

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "metrics/metrics.h"
#include "server/request_log.h"

namespace pagoda::server {

// What /metrics reads besides the counters ServerMetrics keeps.
struct MetricsSources {
    const engine::Engine& engine;
    std::string model_name;
    bool ready = false;
    bool vllm_names = true;                     // also publish the vllm:* families
    std::function<int64_t()> open_connections;  // may be empty
    std::function<int64_t()> stream_writes;     // may be empty
    int64_t memory_limit_bytes = 0;         // --memory-limit or the cgroup's; 0: physical memory
    double memory_bandwidth = 0;            // measured peak, bytes/s (0: not published)
    std::string replica_state = "serving";  // warming | serving | shedding | draining
};

class ServerMetrics {
  public:
    explicit ServerMetrics(LengthClasses classes = {});

    // A request's last event (timings, usage, finish reason) and its inter-token gaps.
    void record_finished(const engine::Event& last, const std::vector<double>& itl);
    void count_response(int status);  // by class, 1xx..5xx
    metrics::Histogram& output_seconds() { return output_; }
    RequestLog& requests() { return log_; }
    const RequestLog& requests() const { return log_; }

    std::string text(const MetricsSources& src) const;

  private:
    void write_request_families(metrics::TextWriter& w, const std::string& prefix,
                                const engine::EngineStats& st, const metrics::Labels& model) const;
    void write_native_detail(metrics::TextWriter& w, const MetricsSources& src,
                             const engine::EngineStats& st, const metrics::Labels& model) const;
    void write_state(metrics::TextWriter& w, const MetricsSources& src,
                     const engine::EngineStats& st, const metrics::Labels& model) const;
    void write_resources(metrics::TextWriter& w, const MetricsSources& src,
                         const engine::EngineStats& st, const metrics::Labels& model) const;
    void write_sim(metrics::TextWriter& w, const MetricsSources& src, const engine::EngineStats& st,
                   const metrics::Labels& model) const;
    // Memory against its limit and memory traffic against the peak bandwidth.
    void write_memory(metrics::TextWriter& w, const MetricsSources& src,
                      const engine::EngineStats& st, const metrics::Labels& model) const;

    metrics::Histogram ttft_, itl_, e2e_, queue_, prefill_, decode_, prompt_tokens_, gen_tokens_;
    metrics::Histogram output_;  // I/O-thread time turning engine events into JSON/SSE, per pump
    std::atomic<int64_t> http_by_status_[6] = {};  // 1xx..5xx by first digit, index 0 unused
    std::atomic<int64_t> finished_[6] = {};        // by engine FinishReason
    std::atomic<int64_t> prompt_total_{0}, gen_total_{0};
    RequestLog log_;
};

}  // namespace pagoda::server
