#pragma once
// The engine flags shared by `pagoda generate` and `pagoda serve` (vLLM's names), and
// their translation into an EngineConfig. Used only by apps/.

#include <string>

#include "base/result.h"
#include "engine/engine.h"

namespace CLI {
class App;
}

namespace pagoda::app {

struct EngineFlags {
    int block_size = 16;
    std::string kv_memory = "256MiB";
    std::string kv_dtype = "auto";  // f32 on the CPU, bf16 on the simulated GPU
    int threads = 0;
    int max_num_seqs = 256;
    int max_num_batched_tokens = 2048;
    int max_model_len = 0;
    bool enable_prefix_caching = true;
    bool enable_chunked_prefill = true;
    int long_prefill_token_threshold = 0;
    int max_waiting_requests = 4096;
};

void add_engine_flags(CLI::App* c, EngineFlags& f);
// Validates the flags and sets the compute thread count.
Result<engine::EngineConfig> engine_config(const EngineFlags& f);

}  // namespace pagoda::app
