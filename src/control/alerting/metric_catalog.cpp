// The series alert rules may name: what /metrics exports (docs/metrics.md), with types.
#include <algorithm>

#include "control/alerting/rule_expr.h"

namespace pagoda::control {

namespace {

struct Entry {
    const char* name;
    MetricType type;
};
constexpr MetricType C = MetricType::kCounter, G = MetricType::kGauge, H = MetricType::kHistogram;

// Families with a vllm: twin of the same type.
constexpr Entry kShared[] = {
    {"num_requests_running", G},
    {"num_requests_waiting", G},
    {"kv_cache_usage_perc", G},
    {"prompt_tokens_total", C},
    {"generation_tokens_total", C},
    {"num_preemptions_total", C},
    {"prefix_cache_queries_total", C},
    {"prefix_cache_hits_total", C},
    {"request_success_total", C},
    {"time_to_first_token_seconds", H},
    {"inter_token_latency_seconds", H},
    {"e2e_request_latency_seconds", H},
    {"request_queue_time_seconds", H},
    {"request_prefill_time_seconds", H},
    {"request_decode_time_seconds", H},
    {"request_prompt_tokens", H},
    {"request_generation_tokens", H},
    {"cache_config_info", G},
    {"spec_decode_num_drafts_total", C},
    {"spec_decode_num_draft_tokens_total", C},
    {"spec_decode_num_accepted_tokens_total", C},
};
// Families Pagoda alone exports.
constexpr Entry kNative[] = {
    {"config_version", G},
    {"config_changes_total", C},
    {"config_rollbacks_total", C},
    {"config_refusals_total", C},
    {"context_length_ema_tokens", G},
    {"context_length_requests_total", C},
    {"block_size_decisions_total", C},
    {"oom_risk", G},
    {"oom_risk_seconds_total", C},
    {"automation_paused", G},
    {"requests_waiting_by_reason", G},
    {"kv_cache_blocks", G},
    {"kv_cache_memory_bytes", G},
    {"engine_steps_total", C},
    {"max_num_seqs", G},
    {"max_num_batched_tokens", G},
    {"engine_step_seconds_total", C},
    {"step_schedule_seconds", H},
    {"step_forward_seconds", H},
    {"step_sample_seconds", H},
    {"step_output_seconds", H},
    {"step_seconds", H},
    {"http_output_seconds", H},
    {"http_responses_total", C},
    {"http_open_connections", G},
    {"http_stream_writes_total", C},
    {"ready", G},
    {"process_resident_memory_bytes", G},
    {"process_cpu_seconds_total", C},
    {"process_threads", G},
    {"compute_busy_seconds_total", C},
    {"memory_limit_bytes", G},
    {"memory_used_bytes", G},
    {"memory_usage_perc", G},
    {"memory_traffic_bytes_total", C},
    {"memory_bandwidth_peak_bytes_per_second", G},
    {"step_memory_bandwidth_perc", G},
    {"idle_wakeup_seconds", H},
    {"grammar_mask_seconds", H},
    {"constrained_requests_total", C},
    {"warmup_cpu_seconds_total", C},
    {"warm_passes_total", C},
    {"warm_level", G},
    {"warmup_seconds_total", C},
    {"requests_total", C},
    {"request_errors_total", C},
    {"request_stage_seconds", H},
    {"time_to_first_token_by_length_seconds", H},
    {"e2e_request_latency_by_length_seconds", H},
    {"inter_token_latency_by_length_seconds", H},
    {"replica_state", G},
    {"alerts", G},
    {"alert_actions_total", C},
    {"alert_rule_reloads_total", C},
    {"sim_busy_seconds_total", C},
    {"sim_tensor_seconds_total", C},
    {"sim_hbm_seconds_total", C},
    {"sim_interconnect_seconds_total", C},
    {"sim_gpu_memory_bytes", G},
};

std::vector<MetricInfo> build() {
    std::vector<MetricInfo> out;
    for (const Entry& m : kShared) {
        out.push_back({std::string("pagoda_") + m.name, m.type});
        out.push_back({std::string("vllm:") + m.name, m.type});
    }
    for (const Entry& m : kNative) out.push_back({std::string("pagoda_") + m.name, m.type});
    std::sort(out.begin(), out.end(),
              [](const MetricInfo& a, const MetricInfo& b) { return a.name < b.name; });
    return out;
}

}  // namespace

const std::vector<MetricInfo>& metric_catalog() {
    static const std::vector<MetricInfo> catalog = build();
    return catalog;
}

const MetricInfo* find_metric(std::string_view name) {
    const auto& c = metric_catalog();
    auto it = std::lower_bound(c.begin(), c.end(), name,
                               [](const MetricInfo& m, std::string_view n) { return m.name < n; });
    return it != c.end() && it->name == name ? &*it : nullptr;
}

}  // namespace pagoda::control
