// The engine flags, generated from the settings table (engine_flags.h).
#include "apps/engine_flags.h"

#include <CLI/CLI.hpp>

#include "apps/cli_common.h"
#include "kernels/cpu/ops.h"

namespace pagoda::app {

namespace {

const settings::Spec& spec_of(std::string_view name) {
    const settings::Spec* s = settings::find(name);
    if (s == nullptr) throw CLI::BadNameString(std::string(name) + " is not in the settings table");
    return *s;
}

// The table's check as a CLI11 validator: the message is the table's, so a bad flag, a bad
// `--config` key and a bad PUT /admin/config value read the same.
CLI::Validator table_check(const settings::Spec& s) {
    return CLI::Validator(
        [&s](std::string& text) -> std::string {
            auto v = settings::parse_text(s, text);
            return v.ok() ? std::string() : v.error().message;
        },
        s.allowed());
}

std::string names_of(const settings::Spec& s) {
    std::string n = s.flag();
    if (!s.short_alias.empty()) n = std::string(s.short_alias) + "," + n;
    return n;
}

std::string help_of(const settings::Spec& s) {
    std::string h(s.help);
    if (settings::is_knob(s)) h += " (runtime knob)";
    return h;
}

template <typename T>
CLI::Option* add_valued(CLI::App* c, const settings::Spec& s, T& target) {
    return c->add_option(names_of(s), target, help_of(s))
        ->default_str(std::string(s.default_text))
        ->check(table_check(s))
        ->group(std::string(s.group));
}

}  // namespace

CLI::Option* add_setting_flag(CLI::App* c, std::string_view name, int& target) {
    return add_valued(c, spec_of(name), target);
}
CLI::Option* add_setting_flag(CLI::App* c, std::string_view name, int64_t& target) {
    return add_valued(c, spec_of(name), target);
}
CLI::Option* add_setting_flag(CLI::App* c, std::string_view name, std::string& target) {
    return add_valued(c, spec_of(name), target);
}
CLI::Option* add_setting_flag(CLI::App* c, std::string_view name, bool& target) {
    const settings::Spec& s = spec_of(name);
    const std::string f = s.flag();
    return c
        ->add_flag(f + ",!--no-" + f.substr(2), target,
                   help_of(s) + " (default " + std::string(s.default_text) + ")")
        ->check(table_check(s))
        ->group(std::string(s.group));
}

void add_engine_flags(CLI::App* c, EngineFlags& f) {
    add_setting_flag(c, "block_size", f.block_size);
    add_setting_flag(c, "kv_cache_memory", f.kv_memory);
    add_setting_flag(c, "kv_cache_dtype", f.kv_dtype);
    add_setting_flag(c, "threads", f.threads);
    add_setting_flag(c, "max_num_seqs", f.max_num_seqs);
    add_setting_flag(c, "max_num_batched_tokens", f.max_num_batched_tokens);
    add_setting_flag(c, "max_model_len", f.max_model_len);
    add_setting_flag(c, "enable_prefix_caching", f.enable_prefix_caching);
    add_setting_flag(c, "enable_chunked_prefill", f.enable_chunked_prefill);
    add_setting_flag(c, "long_prefill_token_threshold", f.long_prefill_token_threshold);
    add_setting_flag(c, "max_waiting_requests", f.max_waiting_requests);
    add_setting_flag(c, "max_waiting_tokens", f.max_waiting_tokens);
    c->add_option("--speculative-config", f.speculative_config,
                  "Speculative decoding, vLLM's JSON: '{\"method\":\"ngram\","
                  "\"num_speculative_tokens\":4,\"prompt_lookup_max\":5}' proposes up to 4 "
                  "tokens by prompt lookup (n-grams of 5 down to prompt_lookup_min, default 2) "
                  "and verifies them in one pass; greedy samples only, same output as without")
        ->group("Engine");
}

Result<nlohmann::json> engine_flags_json(const EngineFlags& f) {
    PAGODA_ASSIGN_OR_RETURN(engine::EngineConfig c, engine_config(f));
    nlohmann::json j = nlohmann::json::object();
    for (const settings::Spec& s : settings::all()) {
        if (auto k = c.sched.knobs.get(s.name)) j[std::string(s.name)] = *k;
    }
    j["block_size"] = c.kv.block_size;
    j["kv_cache_memory"] = c.kv.memory_bytes;
    PAGODA_ASSIGN_OR_RETURN(settings::Value dtype,
                            settings::parse_text(*settings::find("kv_cache_dtype"), f.kv_dtype));
    j["kv_cache_dtype"] = dtype.text;
    j["threads"] = f.threads;
    j["max_model_len"] = c.sched.max_model_len;
    j["enable_prefix_caching"] = c.enable_prefix_caching;
    j["enable_chunked_prefill"] = c.sched.enable_chunked_prefill;
    if (c.spec.enabled()) j["speculative_config"] = nlohmann::json::parse(engine::to_json(c.spec));
    return j;
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
    c.sched.knobs.max_waiting_tokens = f.max_waiting_tokens;
    PAGODA_ASSIGN_OR_RETURN(c.spec, engine::parse_speculative_config(f.speculative_config));
    return c;
}

}  // namespace pagoda::app
