#include "apps/engine_flags.h"

#include <CLI/CLI.hpp>

#include "apps/cli_common.h"
#include "kernels/cpu/ops.h"

namespace pagoda::app {

void add_engine_flags(CLI::App* c, EngineFlags& f) {
    c->add_option("--block-size", f.block_size, "KV cache block size in tokens")
        ->capture_default_str()
        ->check(CLI::IsMember({8, 16, 32, 48, 64, 128}))
        ->group("Engine");
    c->add_option("--kv-cache-memory", f.kv_memory,
                  "KV cache budget: bytes with unit (512MiB, 2GiB) or a fraction of RAM (0.2)")
        ->capture_default_str()
        ->group("Engine");
    c->add_option("--kv-cache-dtype", f.kv_dtype,
                  "KV cache storage: f32, f16, bf16; auto: f32 (bf16 with --backend sim). f16 and "
                  "bf16 halve its memory; bf16 on AVX512_BF16 CPUs also runs attention on bf16 "
                  "dot products (long prompts ~1.2-1.3x faster, slightly less accurate)")
        ->capture_default_str()
        ->group("Engine");
    c->add_option("-t,--threads", f.threads, "Compute threads; 0 = all cores")
        ->capture_default_str()
        ->check(CLI::Range(0, 1024))
        ->group("Engine");
    c->add_option("--max-num-seqs", f.max_num_seqs, "Most sequences in one step (runtime knob)")
        ->capture_default_str()
        ->check(CLI::Range(1, 65536))
        ->group("Engine");
    c->add_option("--max-num-batched-tokens", f.max_num_batched_tokens,
                  "Token budget of one step (runtime knob)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 20))
        ->group("Engine");
    c->add_option("--max-model-len", f.max_model_len,
                  "Longest prompt + output in tokens; 0 = the model's context length")
        ->capture_default_str()
        ->check(CLI::Range(0, 1 << 24))
        ->group("Engine");
    c->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", f.enable_prefix_caching,
                "Reuse the KV blocks of shared prompt prefixes (default on)")
        ->group("Engine");
    c->add_flag("--enable-chunked-prefill,!--no-enable-chunked-prefill", f.enable_chunked_prefill,
                "Split long prompts across steps so decodes keep flowing (default on)")
        ->group("Engine");
    c->add_option("--long-prefill-token-threshold", f.long_prefill_token_threshold,
                  "Most tokens one prompt may take in a step; 0 = no cap (runtime knob)")
        ->capture_default_str()
        ->check(CLI::Range(0, 1 << 20))
        ->group("Engine");
    c->add_option("--max-waiting-requests", f.max_waiting_requests,
                  "Bound of the waiting queue; beyond it requests are refused with a retry hint "
                  "(runtime knob)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 24))
        ->group("Engine");
}

Result<engine::EngineConfig> engine_config(const EngineFlags& f) {
    if (f.threads > 0) kernels::cpu::set_num_threads(f.threads);
    PAGODA_ASSIGN_OR_RETURN(int64_t mem, parse_memory(f.kv_memory));
    PAGODA_ASSIGN_OR_RETURN(kvcache::KvDtype dtype, kvcache::parse_kv_dtype(f.kv_dtype));
    engine::EngineConfig c;
    c.kv = {.block_size = f.block_size,
            .dtype = dtype,
            .num_blocks = 0,
            .memory_bytes = mem,
            .virtual_memory = false};
    c.enable_prefix_caching = f.enable_prefix_caching;
    c.sched.enable_chunked_prefill = f.enable_chunked_prefill;
    c.sched.max_model_len = f.max_model_len;
    c.sched.knobs.max_num_seqs = f.max_num_seqs;
    c.sched.knobs.max_num_batched_tokens = f.max_num_batched_tokens;
    c.sched.knobs.long_prefill_token_threshold = f.long_prefill_token_threshold;
    c.sched.knobs.max_waiting_requests = f.max_waiting_requests;
    return c;
}

}  // namespace pagoda::app
