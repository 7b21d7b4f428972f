#pragma once
// `pagoda rehearse`: one compressed production day replayed on the virtual-clock fleet
// (fleet_sim.h) in three arms on the same arrivals:
//   defaults     vLLM's defaults on the card (max_num_seqs 256, max_num_batched_tokens 2048
//                below H100, block 16) at the fewest static replicas that hold the SLO all
//                day (replicas for the peak);
//   best_static  the best single static configuration and replica count for that day: the
//                settings table's tune grid, each config's per-replica capacity probed, the
//                fewest replicas that hold the SLO all day, then the most goodput;
//   control      Pagoda's loop on the best static knobs: pool sizing from yesterday's rates
//                (the seasonal-naive forecast) read ahead by the cold start, and the live
//                queue and TTFT, with drain-safe scale-down and the router's hold at zero.
// The result has, per arm and per hour, goodput, SLO attainment, replica-hours, preemptions,
// actions and accepted requests lost, and the ratios between arms.

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "rehearse/day.h"
#include "rehearse/fleet_sim.h"

namespace pagoda::rehearse {

struct RehearseOptions {
    std::string gpu = "a100-80g", model = "llama-3-8b";
    int max_model_len = 8192;
    Slo slo;
    double cold_start_s = 90;  // a replica's start to ready (weights, warmup), day seconds
    int max_replicas = 16;
    std::vector<Fault> faults;
    // The control arm's sizing bounds and time constants (a fleet file's pool); replica_rps
    // 0 = from best_static. Unset: min 1, max best_static + 2, the defaults below.
    std::optional<control::PoolSizingConfig> pool;
    // The knob grid of best_static (from the settings table's tune grids by default).
    std::vector<int> seqs_grid = {64, 128, 256}, tokens_grid = {1024, 2048, 4096, 8192};
    std::function<void(const std::string&)> progress;  // one line per finished run
};

struct Rehearsal {
    Day day;
    std::vector<ArmResult> arms;         // defaults, best_static, control
    std::vector<nlohmann::json> search;  // best_static's tried configurations
    nlohmann::json to_json(const RehearseOptions& o) const;
};

// Parses "p99_ttft_ms<800,p99_tpot_ms<100" (keys p99_ttft_ms, p99_tpot_ms, attainment).
Result<Slo> parse_slo(const std::string& text);
// A fault file: [[fault]] kind = "kill" | "slow", at = "14:00", duration = "10m", factor.
Result<std::vector<Fault>> load_faults(const std::string& path);

Result<Rehearsal> rehearse(const Day& day, const std::vector<double>& forecast_per_min,
                           const RehearseOptions& o);

// The terminal table (arms, ratios, per hour) and the HTML report with the day's curves.
std::string text_report(const Rehearsal& r, const RehearseOptions& o);
std::string html_report(const Rehearsal& r, const RehearseOptions& o);

}  // namespace pagoda::rehearse
