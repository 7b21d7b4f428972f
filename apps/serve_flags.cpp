// `pagoda serve`'s flag groups of the simulated backend and the control plane (the contract
// is in apps/serve_flags.h).
#include "apps/serve_flags.h"

#include <CLI/CLI.hpp>

namespace pagoda::app {

void add_sim_flags(CLI::App* c, ServeFlags& f) {
    const char* g = "Simulated GPU (--backend sim)";
    c->add_option("--backend", f.backend,
                  "cpu: run the model on this machine; sim: the same server, scheduler and "
                  "control plane with step times and memory from a performance model of "
                  "--sim-gpu (no weights are loaded)")
        ->capture_default_str()
        ->check(CLI::IsMember({"cpu", "sim"}))
        ->group(g);
    std::string gpus;
    for (const auto& s : model::sim::builtin_gpus()) gpus += (gpus.empty() ? "" : ", ") + s.name;
    c->add_option("--sim-gpu", f.sim_gpu, "The card to model: " + gpus)
        ->capture_default_str()
        ->group(g);
    c->add_option("--sim-gpu-table", f.sim_gpu_table,
                  "A GPU table file (like src/model/sim/gpus.toml) with more cards, e.g. the "
                  "one `pagoda sim calibrate -o FILE` writes for this machine's CPU")
        ->check(CLI::ExistingFile)
        ->group(g);
    std::string shapes;
    for (const auto& s : model::known_shapes()) shapes += (shapes.empty() ? "" : ", ") + s.name;
    c->add_option("--sim-model", f.sim_model,
                  "The model to simulate: a shape (" + shapes +
                      ") or a GGUF file (its shape and tokenizer; weights are not read)")
        ->capture_default_str()
        ->group(g);
    add_setting_flag(c, "tensor_parallel_size", f.tensor_parallel_size)->group(g);
    c->add_option("--gpu-memory-utilization", f.gpu_memory_utilization,
                  "Share of each GPU's memory for weights, activations and KV cache (vLLM's)")
        ->capture_default_str()
        ->check(CLI::Range(0.01, 1.0))
        ->group(g);
    c->add_option("--sim-weight-dtype", f.sim_weight_dtype,
                  "Weights on the GPU: bf16, fp8, q8_0, q4_0")
        ->capture_default_str()
        ->group(g);
    c->add_option("--sim-speed", f.sim_speed,
                  "Divide every modelled duration by this (10: ten modelled seconds a second)")
        ->capture_default_str()
        ->check(CLI::Range(1e-3, 1e6))
        ->group(g);
    c->add_option("--sim-eos-probability", f.sim_eos_probability,
                  "Chance that a generated token is EOS (the output-length model when "
                  "max_tokens and ignore_eos do not decide)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0))
        ->group(g);
    c->add_option("--sim-seed", f.sim_seed, "Seed of the generated tokens")
        ->capture_default_str()
        ->group(g);
}

void add_control_flags(CLI::App* c, ServeFlags& f) {
    c->add_option("--block-size-policy", f.block_size_policy,
                  "How the KV block size follows the traffic: static (as --block-size), seed "
                  "(the published heuristic), measured (lowest cost on this machine's kernels "
                  "for the observed context lengths)")
        ->capture_default_str()
        ->check(CLI::IsMember({"static", "seed", "measured"}));
    c->add_option("--block-size-interval", f.block_size_interval,
                  "How often the block-size policy decides (5m, 1h, seconds)")
        ->capture_default_str();
    c->add_option("--block-size-min-gain", f.block_size_min_gain,
                  "Predicted gain below which `measured` keeps the current block size")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    c->add_option("--block-size-min-samples", f.block_size_min_samples,
                  "Finished requests a block-size decision needs in its window")
        ->capture_default_str()
        ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
    c->add_option("--block-size-cooldown", f.block_size_cooldown,
                  "Least time between two policy changes of the block size")
        ->capture_default_str();
    c->add_option("--recalibrate-every", f.recalibrate_every,
                  "How often `seed` refits its scaling factor from the measured kernel cost")
        ->capture_default_str();
    c->add_option("--automation,--control", f.automation,
                  "Automatic actions (block-size policy, OOM guard rollbacks): on, dry-run "
                  "(recorded in the audit log, not applied), paused; PUT /admin/automation "
                  "changes it at run time")
        ->capture_default_str()
        ->check(CLI::IsMember({"on", "dry-run", "paused"}));
    c->add_option("--oom-guard-window", f.oom_guard_window,
                  "After a config change, how long an OOM-risk signal rolls it back (to the last "
                  "stable version); later signals are reported only")
        ->capture_default_str();
    c->add_option("--oom-guard-free-blocks", f.oom_guard_free_blocks,
                  "OOM risk: free KV blocks under this fraction of the pool while requests wait")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    c->add_option("--oom-guard-preemptions", f.oom_guard_preemptions,
                  "OOM risk: recompute preemptions per minute above this")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1e9));
    c->add_option("--oom-guard-rss-fraction", f.oom_guard_rss_fraction,
                  "OOM risk: resident memory above this fraction of the memory limit")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    c->add_option("--memory-limit", f.memory_limit,
                  "The memory limit the OOM guard measures against (512MiB, 8GiB; default the "
                  "cgroup's memory.max, none when unlimited)");
}

}  // namespace pagoda::app
