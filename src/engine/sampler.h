#pragma once
// Sampler: turns one row of logits into a token id with a seeded RNG per request.
// temperature 0 is greedy (argmax, lowest id on ties). One instance per request;
// not thread-safe.

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "base/result.h"

namespace pagoda::engine {

struct SamplingParams {
    float temperature = 1.0f;  // 0 = greedy
    int top_k = 0;             // 0 or -1 = off
    float top_p = 1.0f;        // (0, 1]
    float min_p = 0.0f;        // [0, 1]
    std::optional<uint64_t> seed;  // none: a random seed

    Status validate() const;
};

class Sampler {
  public:
    explicit Sampler(const SamplingParams& p);
    int32_t sample(std::span<const float> logits);

  private:
    SamplingParams p_;
    std::mt19937_64 rng_;
    std::vector<std::pair<float, int32_t>> cand_;  // scratch
};

int32_t argmax(std::span<const float> logits);

}  // namespace pagoda::engine
