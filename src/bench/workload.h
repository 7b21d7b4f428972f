#pragma once
// From a scenario to concrete requests: send times from the arrival process, a class per
// request by weight, lengths from the class's distributions, and prompt text of an exact
// token count (synthesised with a token counter, or taken from a dataset or trace).

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/result.h"
#include "bench/scenario.h"

namespace pagoda::bench {

struct PlannedRequest {
    double at_s = 0;         // send time from the start; closed loop: 0 (sent when a slot frees)
    int klass = 0;           // index into Scenario::classes
    int64_t input_len = 0;   // target prompt tokens (as the server counts them, BOS included)
    int64_t output_len = 0;  // max_tokens, with ignore_eos
    std::string prompt;      // filled by fill_prompts() unless given by a dataset or trace
    bool has_prompt = false;
    // Mooncake traces: the prompt's blocks by hash id (equal ids, equal text), each
    // `block_tokens` long; fill_prompts() builds the prompt from them.
    std::vector<int64_t> prefix_blocks;
    int64_t block_tokens = 0;
};

// Draws one length. Deterministic for a given generator state.
int64_t sample_length(const LengthDist& d, std::mt19937_64& rng);

// Send-time offsets of an open-loop process over [0, horizon_s), at most max_count of them.
// Phases run back to back; a last phase without duration runs to the horizon.
std::vector<double> arrival_times(const std::vector<Phase>& phases, double horizon_s,
                                  int64_t max_count, uint64_t seed);

// The whole plan. Closed loop: `requests` entries, or `closed_pool` when a duration is set
// and `requests` is unset or larger (reused cyclically; the run still stops at `requests`). Trace:
// read from the scenario's trace file (errors carry file and line).
Result<std::vector<PlannedRequest>> make_plan(const Scenario& s, int64_t closed_pool = 4096);

// Loads "prompt" (and optional "output_len") from a JSONL file.
struct DatasetEntry {
    std::string prompt;
    int64_t output_len = 0;
};
Result<std::vector<DatasetEntry>> load_dataset(const std::string& path);

// Counts the tokens a text becomes, as the server will count them (BOS included).
using TokenCounter = std::function<Result<int64_t>(const std::string&)>;

// Builds prompt text of an exact token count from a seeded stream of English words; each
// variant starts differently, so prompts share no prefix (prefix caching cannot flatter a run).
class PromptBuilder {
  public:
    explicit PromptBuilder(TokenCounter counter) : counter_(std::move(counter)) {}
    struct Built {
        std::string text;
        int64_t tokens =
            0;  // as counted; equals the target unless the tokenizer made it impossible
    };
    Result<Built> build(int64_t target_tokens, uint64_t variant);
    int64_t calls() const { return calls_; }

  private:
    Result<int64_t> count(const std::string& text);
    TokenCounter counter_;
    double tokens_per_word_ = 1.3;
    int64_t calls_ = 0;
    // What the server said before, so that a run's many prompts of one length cost one or
    // two calls each, not ~5: the empty text's count, and per target the word count that
    // last reached it (another variant's words usually need the same number).
    std::optional<int64_t> empty_count_;
    std::map<int64_t, int64_t> words_for_;
};

// Fills every planned request's prompt: datasets per class, else synthesised. `progress`
// is called with (done, total).
Status fill_prompts(const Scenario& s, std::vector<PlannedRequest>& plan, PromptBuilder& builder,
                    const std::function<void(size_t, size_t)>& progress, int64_t* exact_count,
                    uint64_t variant_base = 0);

}  // namespace pagoda::bench
