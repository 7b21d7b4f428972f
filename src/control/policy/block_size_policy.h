#pragma once
// Block-size policies: pure functions from context-length statistics (and, for `measured`,
// a calibration of this machine's attention kernel) to a KV block size, with the numbers
// that explain the choice. The controller (block_size_controller.h) runs them on a timer.
//
// - seed: the published heuristic, exactly: predicted = h*ctx + (1-h)*avg_ctx with
//   h = 0.3 when ctx > 8000 tokens else 0.7; a mixed workload weights the predictions of its
//   short and long requests 0.4 / 0.6; block = clamp(int(predicted * 0.15), 8, 64), then
//   rounded to the nearest size the kernels support (ties to the larger). It saturates at
//   64 for any prediction above ~430 tokens.
// - measured: the size with the lowest predicted cost per decode step for the observed
//   distribution: attention time per size measured on the real kernel (block gather
//   included), inflated by the KV memory lost to partly filled last blocks; sizes whose pool
//   cannot hold the current concurrency are never chosen.
// Thread-safe (pure); calibrate() uses the compute pool.

#include <map>
#include <string>
#include <vector>

#include "control/policy/length_stats.h"
#include "kernels/types.h"

namespace pagoda::control {

enum class BlockSizePolicy { kStatic, kSeed, kMeasured };
Result<BlockSizePolicy> parse_block_size_policy(const std::string& s);
const char* block_size_policy_name(BlockSizePolicy p);

// ---- seed ------------------------------------------------------------------------------

struct SeedParams {
    int base = 16;  // the block size before any statistics exist
    double scaling = 0.15;
    int min_block = 8, max_block = 64;
    double long_context = 8000;  // ctx above this uses h_long
    double h_long = 0.3, h_short = 0.7;
    double w_short = 0.4, w_long = 0.6;  // mixed workload weights
    double mixed_min_share = 0.1;        // both classes hold at least this share: mixed
};

double seed_predicted(double ctx, double avg_ctx, const SeedParams& p);
// clamp(int(predicted * scaling), min, max): before rounding.
int seed_raw_block(double predicted, const SeedParams& p);
// The supported size (kvcache::kAllowedBlockSizes within [lo, hi]) nearest to `block`;
// ties go to the larger size.
int round_to_supported(int block, int lo, int hi);

struct SeedDecision {
    double ctx = 0, avg_ctx = 0, predicted = 0;
    bool mixed = false;
    double short_mean = 0, long_mean = 0, short_share = 0;
    int raw = 0, block = 0;
    json to_json() const;
};
// ctx: the recent length (EMA); avg_ctx: the historical mean; `window`: the lengths the
// mixed-workload test looks at. No lengths at all: the base size.
SeedDecision seed_decide(const LengthHistogram& window, double ctx, double avg_ctx,
                         const SeedParams& p);
// Recalibration: the scaling factor that maps `predicted` onto `best_block` (the measured
// optimum), kept within [0.001, 1].
double refit_scaling(double predicted, int best_block);

// ---- measured --------------------------------------------------------------------------

struct CalibrationShape {
    int num_layers = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
    kernels::KvDtype dtype = kernels::KvDtype::kF32;
};

// One decode step's attention time per sequence (all layers) per block size and context
// length, measured on the real kernel with scattered block tables.
struct Calibration {
    std::string key;  // shape, dtype, SIMD target, threads, host: where the numbers hold
    std::vector<int64_t> lengths;
    std::map<int, std::vector<double>> seconds;  // block size -> seconds at each length
    // Linear between measured lengths, proportional beyond them.
    double attention_seconds(int block, int64_t len) const;
    json to_json() const;
    static Result<Calibration> from_json(const json& j);
};

std::string calibration_key(const CalibrationShape& s);
// Measures every supported size at `lengths` (a few hundred ms for small models).
Result<Calibration> calibrate(const CalibrationShape& s, const std::vector<int64_t>& lengths);

struct MeasuredInputs {
    int64_t kv_memory_bytes = 0;
    int64_t kv_bytes_per_token = 0;  // K and V, all layers
    int64_t concurrency = 1;         // sequences the pool must hold at once
    double kv_pressure = 0;          // recent peak KV usage, 0..1
    int current_block = 16;
};

struct Candidate {
    int block_size = 0;
    double attention_us = 0;  // mean per sequence and decode step over the distribution
    double waste = 0;         // share of allocated KV slots left empty in last blocks
    double cost = 0;          // attention_us / (1 - max(pressure, 0.25) * waste)
    int64_t pool_tokens = 0, need_tokens = 0;
    bool fits = false;
    json to_json() const;
};

struct MeasuredDecision {
    std::vector<Candidate> candidates;
    int block = 0;    // the choice (the current size when nothing fits or no data)
    double gain = 0;  // predicted cost reduction against the current size, 0..1
    std::string reason;
    json to_json() const;
};

inline constexpr double kMinPlanPressure = 0.25;

// ---- the re-layout's economics -----------------------------------------------------------
// A re-layout pays for itself when the attention time it saves until the next change may
// come (the horizon: the cooldown) exceeds what it costs now. Both in engine seconds:
// saving = (cost per sequence and decode step now - with the choice) x decode tokens per
// second (the recent average, so a quiet moment after a busy hour still expects its
// traffic back) x horizon; cost = the tokens in the KV now x the seconds each costs to
// carry over: copied into the new layout (Engine::apply_relayout, a block-size change:
// the KV bytes per token over kRelayoutCopyBytesPerSecond) or, where it cannot be copied,
// recomputed (over the measured prefill rate). Under load a change that does not pay waits
// and is decided again each minute, so it lands at a quiet moment.
inline constexpr double kRelayoutCopyBytesPerSecond = 2e9;  // slot-by-slot memcpy, busy host
struct RelayoutEconomics {
    double saving_s = 0, cost_s = 0;
    int64_t tokens = 0;            // in the KV now: what the re-layout carries over
    double seconds_per_token = 0;  // copy or recompute; infinite when unknown
    double decode_tokens_per_s = 0, horizon_s = 0;
    double net_s() const { return saving_s - cost_s; }
    json to_json() const;
};
RelayoutEconomics relayout_economics(double cost_current_us, double cost_choice_us,
                                     double decode_tokens_per_s, double horizon_s, int64_t tokens,
                                     double seconds_per_token);

MeasuredDecision measured_decide(const LengthHistogram& lengths, const Calibration& cal,
                                 const MeasuredInputs& in);

}  // namespace pagoda::control
