#pragma once
// The simulated GPU under load against published serving figures (issue 37, item 5): each
// published point (engine settings, card, model, a Poisson rate of ShareGPT-like requests,
// median TTFT and TPOT, or the offline request throughput) replayed on one simulated replica
// in virtual time, with the modelled figure and its error beside the published one. The
// engine's own behaviour is modelled where the published run used it (vLLM 0.6.0's
// --num-scheduler-steps 10: admissions wait for the round, tokens arrive at its end; no
// chunked prefill at max_model_len 4096); what stays is fitted: the host-side overhead per
// sequence in a step (Efficiency::seq_overhead_ms), on the points marked for fitting, the
// others held out.

#include <string>
#include <vector>

#include "base/result.h"
#include "model/sim/perf_model.h"
#include "rehearse/fleet_sim.h"

namespace pagoda::rehearse {

struct LoadedPoint {
    std::string gpu, model;
    int tp = 1;
    double rps = 0;  // 0: offline (every request at once; the request throughput is compared)
    int prompts = 0;
    double ttft_ms = 0, tpot_ms = 0, throughput_rps = 0;  // published medians / throughput
    bool fit = false;                                     // fitted on, else held out
    ReplicaConfig engine;
    int max_model_len = 4096;
    std::string source;
};

// vLLM 0.6.0 on Llama-3.1-8B (1x A100-80G) and Llama-3.1-70B (4x H100), ShareGPT, from
// sgl-project/sglang benchmark/benchmark_vllm_060/README.md.
std::vector<LoadedPoint> published_loaded_points();

struct PointResult {
    LoadedPoint point;
    double ttft_ms = 0, tpot_ms = 0, throughput_rps = 0;  // modelled
};

// Replays every point with the card's efficiency and `seq_overhead_ms`.
Result<std::vector<PointResult>> check_points(const std::vector<LoadedPoint>& points,
                                              double seq_overhead_ms);
// The seq_overhead_ms (0 to 0.5 ms, 0.01 steps) with the least mean relative TPOT and
// throughput error over the fit points.
Result<double> fit_seq_overhead(const std::vector<LoadedPoint>& points);
std::string points_table(const std::vector<PointResult>& rows, double seq_overhead_ms);

}  // namespace pagoda::rehearse
