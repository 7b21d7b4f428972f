#pragma once
// The engine thread's state of one request while it runs: LiveRequest (what was submitted,
// its stream, usage and timings) and one Sample per `n`, each backed by a scheduler
// Sequence once it runs. Engine thread only; not thread-safe.
//
// One request per layer: server::ParsedRequest (validated API fields) -> engine::Request
// (ids and sampling, submitted) -> LiveRequest (engine thread) -> scheduler::Sequence per
// sample (tokens and blocks). SampleRef maps a sequence back to its request and sample.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/speculation.h"
#include "engine/stop_matcher.h"
#include "grammar/grammar.h"
#include "kvcache/block_manager.h"
#include "scheduler/scheduler.h"
#include "tokenizer/detokenizer.h"

namespace pagoda::engine {

class RequestStream;

// Every member in the first cache line (what each token reads: whether there are stop
// strings or a grammar is a pointer test, not an optional's flag past its storage).
struct Sample {
    kvcache::SeqId seq =
        kvcache::kNoSeq;  // none until it has a sequence (samples 1..n-1 fork after prefill)
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<tokenizer::IncrementalDetokenizer> detok;  // when the request detokenizes
    std::unique_ptr<StopMatcher> stops;                        // when it has stop strings
    std::unique_ptr<grammar::Matcher> matcher;  // where the output is constrained: its position
    int generated = 0;
    bool done = false;
};

struct LiveRequest {
    uint64_t id = 0;
    std::shared_ptr<RequestStream> stream;
    Request req;
    std::vector<Sample> samples;
    RequestTimings t;
    Usage usage;
    // Tokens masked before min_tokens: EOS/EOT (unless ignore_eos) and stop_token_ids.
    std::vector<int32_t> ends;
    int remaining = 0;       // samples not done
    bool forked = false;     // samples 1..n-1 have their sequences
    bool released = false;   // every sample is done; dropped after the step
    uint64_t last_step = 0;  // the last step it took part in (stage times counted once)
    bool speculate = false;  // proposes drafts (speculation.h: greedy, n = 1, engine has it on)
    DraftBackoff backoff;

    int index_of(const Sample& s) const { return int(&s - samples.data()); }
};

// Which request and sample a scheduler sequence belongs to.
struct SampleRef {
    LiveRequest* req = nullptr;
    int sample = 0;
};

inline constexpr int32_t kNoAllowedToken = -1;

// A token sampled this step for one sample, with the logits row it came from.
struct SampledToken {
    LiveRequest* req = nullptr;
    int sample = 0;
    int32_t token = 0;  // kNoAllowedToken: the grammar left no token to sample
    const float* logits = nullptr;
    bool appended = false;               // an accepted draft: already among the sequence's tokens
    scheduler::Sequence* seq = nullptr;  // the sample's sequence when the plan had it at hand
};

}  // namespace pagoda::engine
