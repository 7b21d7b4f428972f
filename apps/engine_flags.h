#pragma once
// The engine flags shared by `pagoda generate` and `pagoda serve`, generated from the
// settings table (settings/settings.h: vLLM's names, ranges, defaults, help), and their
// translation into an EngineConfig. Used only by apps/.

#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"
#include "engine/engine.h"
#include "settings/settings.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace pagoda::app {

struct EngineFlags {
    int block_size = int(settings::default_int("block_size"));
    std::string kv_memory = settings::default_string("kv_cache_memory");
    std::string kv_dtype = settings::default_string("kv_cache_dtype");  // auto: by backend
    int threads = int(settings::default_int("threads"));
    int max_num_seqs = int(settings::default_int("max_num_seqs"));
    int max_num_batched_tokens = int(settings::default_int("max_num_batched_tokens"));
    int max_model_len = int(settings::default_int("max_model_len"));
    bool enable_prefix_caching = settings::default_int("enable_prefix_caching") != 0;
    bool enable_chunked_prefill = settings::default_int("enable_chunked_prefill") != 0;
    int long_prefill_token_threshold = int(settings::default_int("long_prefill_token_threshold"));
    int max_waiting_requests = int(settings::default_int("max_waiting_requests"));
    int64_t max_waiting_tokens = settings::default_int("max_waiting_tokens");
    // vLLM's --speculative-config JSON (engine/speculation.h); "" = off. Not in the settings
    // table: a startup object, not one value.
    std::string speculative_config;
};

// One setting's flag: its name, help, group and default from the table, and a check that
// gives the table's message (the same one PUT /admin/config gives) for a bad value.
CLI::Option* add_setting_flag(CLI::App* c, std::string_view name, int& target);
CLI::Option* add_setting_flag(CLI::App* c, std::string_view name, int64_t& target);
CLI::Option* add_setting_flag(CLI::App* c, std::string_view name, std::string& target);
CLI::Option* add_setting_flag(CLI::App* c, std::string_view name, bool& target);

void add_engine_flags(CLI::App* c, EngineFlags& f);
// Every engine setting the flags give, by the table's names (sizes in bytes, choices
// canonical): what `pagoda serve --dry-run` prints.
Result<nlohmann::json> engine_flags_json(const EngineFlags& f);
// Validates the flags and sets the compute thread count.
Result<engine::EngineConfig> engine_config(const EngineFlags& f);

}  // namespace pagoda::app
