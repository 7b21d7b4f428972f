#pragma once
// Calibration of the performance model: measured step times (of a GPU, from published
// benchmarks, or of this machine's CPU engine) against what PerfModel predicts, and a fit
// of the efficiency factors that brings the two together. The measurement file is TOML:
//
//   [[set]]                       # one card, model and setting; several sets share a fit
//   gpu = "a100-40g"              # a card of the GPU table
//   model = "llama-3-8b"          # a known shape
//   tp = 1
//   weight_dtype = "bf16"         # bf16, fp16, fp8, q8_0, q4_0
//   kv_cache_dtype = "bf16"       # bf16, f16, f32
//   source = "who measured it, where, with which engine and version"
//   steps = [ { seqs = 1, new_tokens = 1, context = 1088, ms = 13.33, note = "..." } ]
//
// or, for a mixed batch, { batch = [[new_tokens, context, logits], ...], ms = ... }.
// A step row is one engine step of `seqs` sequences each computing `new_tokens` tokens
// after `context` cached ones (a decode: new_tokens = 1; a prefill chunk: seqs = 1,
// context = 0), and its measured duration. Pure; thread-safe.

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/sim/perf_model.h"

namespace pagoda::model::sim {

struct StepMeasurement {
    int seqs = 1, new_tokens = 1;
    int64_t context = 0;
    double ms = 0;
    std::string note;
    // A mixed batch (`batch = [[new_tokens, context, logits], ...]`, e.g. from a step
    // trace) instead of `seqs` equal sequences.
    std::vector<SeqWork> mix;
    std::vector<SeqWork> batch() const;
};

struct MeasurementSet {
    std::string gpu, model, source;
    int tp = 1;
    WeightType weights = WeightType::kBf16;
    kernels::KvDtype kv = kernels::KvDtype::kBF16;
    std::vector<StepMeasurement> steps;
};

// `resolve` turns a set's gpu and model names into a card and a shape (the caller's table
// and shapes); errors name the origin, the set and the field.
Result<std::vector<MeasurementSet>> parse_measurements(std::string_view toml,
                                                       std::string_view origin);
std::string measurements_toml(const std::vector<MeasurementSet>& sets);
// The rows of a step trace (`pagoda serve --step-trace`: JSON lines {"batch": [[new_tokens,
// context, logits], ...], "ms": duration}); at most `max_rows`, evenly spaced over the file.
Result<std::vector<StepMeasurement>> parse_step_trace(std::string_view jsonl,
                                                      std::string_view origin, size_t max_rows);
// src/model/sim/published.toml, compiled in: published vLLM step times on named cards.
const char* published_measurements();

struct FitRow {
    size_t set = 0, row = 0;
    double measured_ms = 0, predicted_ms = 0;
    double rel_error() const { return predicted_ms / measured_ms - 1; }
};

struct FitResult {
    Efficiency efficiency;
    std::vector<FitRow> rows;
    double rms_rel_error = 0, max_abs_rel_error = 0;
};

// Which factors the fit may move; the others keep their start values.
struct FitFactors {
    bool compute = true, memory = true, overhead = true, network = false, overlap = false,
         attention = false;
};

// A card and shape per set (same order as `sets`).
struct SetModel {
    GpuSpec gpu;
    SimShape shape;
};

// Predicts every row with `eff` (no fitting).
Result<FitResult> evaluate(const std::vector<MeasurementSet>& sets,
                           const std::vector<SetModel>& models, const Efficiency& eff);
// Minimises the squared log error of all rows over the chosen factors (coordinate descent
// with golden-section line searches, in log space for the efficiencies), starting at `start`.
Result<FitResult> fit(const std::vector<MeasurementSet>& sets, const std::vector<SetModel>& models,
                      const Efficiency& start, const FitFactors& factors);

}  // namespace pagoda::model::sim
