#pragma once
// `pagoda serve`'s flags: the values they set (ServeFlags, read by cmd_serve.cpp's run_serve)
// and the flag groups of the simulated backend and the control plane. The engine's own
// settings are engine_flags.h, warmup serve_warm.h, alerts serve_alerting.h.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "apps/chat_flags.h"
#include "apps/cli_common.h"
#include "apps/engine_flags.h"
#include "apps/hf_flags.h"
#include "apps/serve_alerting.h"
#include "apps/serve_warm.h"
#include "settings/settings.h"

namespace CLI {
class App;
}

namespace pagoda::app {

struct ServeFlags {
    std::string model = default_model_path();
    std::string host = "127.0.0.1";
    int port = 8000;
    std::vector<std::string> api_keys;
    std::vector<std::string> admin_api_keys;
    bool admin_read_open = false;
    bool disable_access_log = false;
    std::string state_dir;         // empty: control::default_state_dir()
    std::string weight_cache_dir;  // empty: <state dir>/weight-cache
    hf::ConvertOptions hf;         // a Hugging Face directory, converted to <state dir>/hf
    bool no_weight_cache = false;
    std::string stable_window = "10m";
    // The control plane (durations as parse_duration_ms takes them).
    std::string block_size_policy = "measured";
    std::string block_size_interval = "5m", block_size_cooldown = "15m";
    double block_size_min_gain = 0.05;
    int64_t block_size_min_samples = 100;
    std::string recalibrate_every = "24h";
    std::string automation = "on";
    std::string oom_guard_window = "5m";
    double oom_guard_free_blocks = 0.02, oom_guard_preemptions = 60, oom_guard_rss_fraction = 0.9;
    std::string memory_limit;  // empty: cgroup memory.max
    std::string config_file;   // --config
    // The simulated GPU backend.
    std::string backend = "cpu";
    std::string sim_gpu = "a100-80g", sim_model = "llama-3-8b", sim_weight_dtype = "bf16";
    std::string sim_gpu_table;  // extra cards, e.g. from `pagoda sim calibrate`
    std::string step_trace;     // --step-trace FILE
    int tensor_parallel_size = int(settings::default_int("tensor_parallel_size"));
    double gpu_memory_utilization = 0.9, sim_speed = 1.0, sim_eos_probability = 0.005;
    uint64_t sim_seed = 0;
    std::string served_model_name;
    int stream_interval = 1;
    int shutdown_timeout = 30;
    bool vllm_metrics = true;
    size_t max_body = 8u << 20;
    bool dry_run = false;
    EngineFlags engine;
    ChatFlags chat;
    AlertFlags alerts;
    WarmFlags warm;
};

// --backend sim and its card, model and speed (group "Simulated GPU").
void add_sim_flags(CLI::App* c, ServeFlags& f);
// The control plane: block-size policy, recalibration, automation mode, OOM guard.
void add_control_flags(CLI::App* c, ServeFlags& f);

}  // namespace pagoda::app
