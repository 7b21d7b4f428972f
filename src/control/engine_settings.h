#pragma once
// EngineSettings: a replica's live configuration as one value, in two parts: step knobs
// (applied by the engine between steps) and the KV layout (block size, KV dtype, KV memory;
// applied by a KV re-layout). JSON in and out with vLLM's flag names as keys (underscores);
// a patch is validated whole and a bad key, type or value is an error naming the key, the
// value and what is allowed. Pure values; thread-safe.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/engine.h"

namespace pagoda::control {

using json = nlohmann::json;

struct KvLayout {
    int block_size = 16;
    kvcache::KvDtype kv_cache_dtype = kvcache::KvDtype::kF32;
    int64_t kv_cache_memory_bytes = 256ll << 20;

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
Result<EngineSettings> apply_patch(const EngineSettings& base, const json& patch);

// {"key": {"from": old, "to": new}} for every key that differs.
json diff(const EngineSettings& from, const EngineSettings& to);

// Every key apply_patch accepts, for messages and docs.
const std::vector<std::string>& setting_keys();

}  // namespace pagoda::control
