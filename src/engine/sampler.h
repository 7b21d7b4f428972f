#pragma once
// Sampling: request parameters (OpenAI's and vLLM's names and defaults), and the Sampler
// that turns one row of logits into a token id. Order of processing, as in vLLM: logit_bias,
// min_tokens (end tokens masked), repetition penalty (prompt and output), frequency and
// presence penalties (output), then temperature, top_k, min_p, top_p and a draw from a seeded
// RNG. temperature 0 is greedy (argmax, lowest id on ties). One Sampler per output sequence;
// not thread-safe.

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/result.h"

namespace pagoda::grammar {
struct Grammar;
class MaskCache;
}  // namespace pagoda::grammar

namespace pagoda::engine {

// Output constrained by a grammar (structured outputs, tool calls): compiled once per
// distinct grammar and shared by the requests that use it, with the token masks computed
// for it so far.
struct Constraint {
    std::shared_ptr<const grammar::Grammar> grammar;
    std::shared_ptr<grammar::MaskCache> masks;
    std::string kind;  // what asked for it (json_object, json_schema, regex, choice, grammar, tool)
};

struct SamplingParams {
    float temperature = 1.0f;                           // 0 = greedy
    int top_k = 0;                                      // 0 or -1 = off
    float top_p = 1.0f;                                 // (0, 1]
    float min_p = 0.0f;                                 // [0, 1]
    std::optional<uint64_t> seed;                       // none: a random seed
    float repetition_penalty = 1.0f;                    // (0, 2]; 1 = off
    float presence_penalty = 0.0f;                      // [-2, 2]
    float frequency_penalty = 0.0f;                     // [-2, 2]
    std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> bias in [-100, 100]

    int max_tokens = 16;            // new tokens per output (OpenAI's default for completions)
    int min_tokens = 0;             // end tokens and stop strings are ignored before this many
    std::vector<std::string> stop;  // stop strings (never part of the output)
    std::vector<int32_t> stop_token_ids;  // extra end tokens
    bool ignore_eos = false;
    int n = 1;          // parallel samples sharing the prompt's blocks
    int logprobs = -1;  // -1: none; k >= 0: the chosen token's logprob and the top k alternatives
    // Only tokens that keep the output a valid prefix of the grammar are sampled; the end
    // of sequence only where the grammar accepts. The output ends ("stop") when it is
    // complete and nothing can follow.
    std::shared_ptr<const Constraint> constraint;

    // vocab_size 0 skips the token id range checks.
    Status validate(int vocab_size = 0) const;
};

inline constexpr int kMaxLogprobs = 20;
inline constexpr int kMaxN = 64;

class Sampler {
  public:
    // `index` distinguishes the n samples of one request (seed + index).
    explicit Sampler(const SamplingParams& p, int index = 0);
    // Plain sampling of a logits row (no penalties; the row is not changed).
    int32_t sample(std::span<const float> logits);
    // Full processing: `prompt` for the repetition penalty, the sampler's own history for
    // the others; `end_tokens` are masked while fewer than min_tokens were generated.
    // `allowed` (one byte per token, when not empty): tokens with 0 are never drawn (a
    // grammar's mask); at least one must be allowed.
    int32_t sample(std::span<const float> logits, std::span<const int32_t> prompt,
                   std::span<const int32_t> end_tokens, std::span<const uint8_t> allowed = {});
    // Whether sample(logits, prompt, end_tokens) would be the raw row's argmax (temperature
    // 0 and nothing reshaping the row: no penalty, bias or end-token mask), so a token
    // sampled on the device can stand for it. A grammar's mask is the caller's to check.
    bool greedy(std::span<const int32_t> end_tokens) const;
    // Records a generated token (penalty history).
    void accept(int32_t token);
    int num_generated() const { return generated_; }

  private:
    int32_t draw(std::span<const float> logits);
    bool masks_end(std::span<const int32_t> end_tokens) const;  // before min_tokens
    bool reshapes(std::span<const int32_t> end_tokens) const;   // penalty, bias or end mask
    // What a greedy step reads and writes, in the first cache line (the line
    // Engine::prefetch_step_state fetches); the parameters next; the generator's 2.5 KB of
    // state last.
    int index_ = 0;
    int generated_ = 0;
    int min_tokens_ = 0;  // p_.min_tokens
    bool penalties_;      // repetition, presence or frequency: the history is kept
    bool plain_greedy_;   // temperature 0, no penalty, no logit bias
    SamplingParams p_;
    std::unordered_map<int32_t, int> counts_;      // generated token -> occurrences
    std::vector<float> row_;                       // scratch: processed logits
    std::vector<std::pair<float, int32_t>> cand_;  // scratch
    std::optional<std::mt19937_64> rng_;  // seeded at the first random draw (greedy never draws)
};

int32_t argmax(std::span<const float> logits);

// log-softmax of the raw row: the chosen token's logprob and the top `k` alternatives.
struct TokenLogprob {
    int32_t token = 0;
    float logprob = 0.0f;
    std::vector<std::pair<int32_t, float>> top;  // best first
};
TokenLogprob compute_logprobs(std::span<const float> logits, int32_t token, int k);

}  // namespace pagoda::engine
