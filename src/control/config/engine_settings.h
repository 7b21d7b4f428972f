#pragma once
// EngineSettings: a replica's live configuration as one value, in two parts: step knobs
// (applied by the engine between steps) and the KV layout (block size, KV dtype, KV memory;
// applied by a KV re-layout). The keys, ranges and messages are the settings table's
// (settings/settings.h); JSON in and out with vLLM's flag names as keys (underscores). A
// patch is validated whole and changes nothing when any key is bad. Pure values; thread-safe.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/engine.h"
#include "settings/settings.h"

namespace pagoda::control {

using json = nlohmann::json;

struct KvLayout {
    int block_size = int(settings::default_int("block_size"));
    kvcache::KvDtype kv_cache_dtype = kvcache::KvDtype::kF32;  // "auto" on the CPU
    int64_t kv_cache_memory_bytes = settings::default_int("kv_cache_memory");

    bool operator==(const KvLayout&) const = default;
};

struct EngineSettings {
    scheduler::RuntimeKnobs knobs;  // step knobs
    KvLayout layout;

    bool operator==(const EngineSettings& o) const;
    Status validate() const;
    json to_json() const;
    // The settings of a running engine.
    static EngineSettings of(const engine::Engine& e);
};

// `base` with the keys of `patch` (a JSON object, any subset of to_json()'s keys) replaced.
// Errors name the key, the value and the allowed range; `base` is never changed.
// kv_cache_dtype "auto" is `auto_dtype` (the backend's: f32 on the CPU, bf16 simulated).
Result<EngineSettings> apply_patch(const EngineSettings& base, const json& patch,
                                   kvcache::KvDtype auto_dtype = kvcache::KvDtype::kF32);

// {"key": {"from": old, "to": new}} for every key that differs.
json diff(const EngineSettings& from, const EngineSettings& to);

// Every key apply_patch accepts, for messages and docs.
const std::vector<std::string>& setting_keys();

}  // namespace pagoda::control
