#pragma once
// The virtual-clock fleet of `pagoda rehearse`: simulated replicas (the real Scheduler and
// BlockManager, step times from the sim's PerfModel), the router's balancing
// (router::pick_backend) with the hold queue of a pool that is waking, and the pool sizer
// (control::PoolSizer) ticking on the day's clock, all driven by one event loop in
// simulated seconds, so a whole day runs in seconds on two cores (as DynoSim does for
// Dynamo). A day compressed N times plays each stretch of the day at its own rate for 1/N
// of its length; the control plane's time constants (cold start, cooldowns, ticks) are in
// day seconds and shrink with it. Drain-safe: a replica chosen to leave takes no new
// request and stops when its last stream finished; a killed replica's streams resume on
// another replica from their tokens (as the router resumes them). Deterministic.

#include <cstdint>
#include <string>
#include <vector>

#include "control/sizing/pool_sizer.h"
#include "model/sim/perf_model.h"

namespace pagoda::rehearse {

struct Arrival {
    double t_s = 0;  // simulated seconds from the start of the (compressed) day
    int32_t prompt = 0, output = 0;
    bool long_prompt = false;
};

struct Slo {
    double ttft_s = 0.8, tpot_s = 0.1;
    double attainment = 0.99;  // share of requests that must meet both (p99 SLOs: 0.99)
};

// A replica's static configuration: the step knobs and the KV layout.
struct ReplicaConfig {
    int max_num_seqs = 256, max_num_batched_tokens = 2048, block_size = 16;
    double gpu_memory_utilization = 0.9;
    bool chunked_prefill = true;
    // vLLM's --num-scheduler-steps: a batch of decodes runs this many steps before the
    // scheduler admits again; tokens reach the client at the end of the round.
    int scheduler_steps = 1;
    std::string label() const;  // "seqs 256, tokens 2048, block 16"
};

// An injected fault, at a time of the day (seconds since midnight).
struct Fault {
    enum class Kind { kKill, kSlow };
    Kind kind = Kind::kKill;
    double at_day_s = 0;
    double duration_day_s = 0;  // slow: how long it lasts
    double factor = 1;          // slow: step time x this
};
const char* fault_kind_name(Fault::Kind k);

struct ArmPlan {
    std::string name;
    ReplicaConfig replica;
    int replicas = 1;  // static arms: all day; with sizing: at the start
    bool sizing = false;
    control::PoolSizingConfig sizer;
    std::vector<double> forecast_per_min;  // forecast rate per minute of the day (sizing)
    double cold_start_day_s = 60;          // start to ready, day seconds
    double tick_day_s = 15;                // the sizer's tick
    int hold_limit = 512;                  // requests the router holds while none is ready
    double hold_timeout_day_s = 120;       // then 503 with Retry-After
};

struct Bucket {  // one stretch of the day (an hour, or a curve point)
    int64_t requests = 0, good = 0, refused = 0, lost = 0, preemptions = 0, actions = 0;
    double replica_s = 0;    // simulated replica-seconds (starting replicas count: they cost)
    double rate_rps = 0;     // arrivals per simulated second
    double goodput_rps = 0;  // requests meeting the SLO per simulated second
    double p99_ttft_s = 0;   // of the requests that arrived in it
    double mean_replicas = 0;
    std::vector<float> ttfts;  // while running; cleared by finish()
};

struct ArmResult {
    std::string name;
    ReplicaConfig replica;
    int64_t requests = 0, good = 0, refused = 0, lost = 0, resumed = 0, preemptions = 0;
    int64_t actions = 0;  // sizing changes applied
    double sim_s = 0, replica_s = 0;
    double goodput_rps = 0, slo_attainment = 0;
    double replica_hours = 0;  // of the real day (simulated replica-seconds x compression)
    double goodput_per_replica_hour = 0;
    double p99_ttft_s = 0, p99_tpot_s = 0, p50_ttft_s = 0, p50_tpot_s = 0;
    double last_done_s = 0;  // when the last request finished (simulated seconds)
    int max_replicas = 0;
    std::vector<Bucket> hours, curve;  // 24 hours; 96 quarter-hours
    std::vector<std::string> events;   // sizing decisions and faults, "HH:MM reason 3 -> 4"
};

struct DayShape {
    double day_s = 86400;  // of the real day the arrivals cover
    double compress = 1;   // simulated seconds = day seconds / compress
};

// Runs one arm over the arrivals. Errors: a configuration the card cannot hold.
Result<ArmResult> simulate(const model::sim::PerfModel& perf, int max_model_len,
                           const std::vector<Arrival>& arrivals, const DayShape& day,
                           const ArmPlan& arm, const Slo& slo, const std::vector<Fault>& faults);

}  // namespace pagoda::rehearse
