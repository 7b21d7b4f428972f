#include "control/engine_settings.h"

#include <fmt/core.h>

#include <limits>

#include "base/units.h"

namespace pagoda::control {

namespace {

// One integer setting: where it lives and its range.
struct IntKey {
    const char* name;
    int64_t min, max;
    int64_t (*get)(const EngineSettings&);
    void (*set)(EngineSettings&, int64_t);
};

const std::vector<IntKey>& int_keys() {
    static const std::vector<IntKey> keys = {
        {"max_num_seqs", 1, 65536,
         [](const EngineSettings& s) { return int64_t(s.knobs.max_num_seqs); },
         [](EngineSettings& s, int64_t v) { s.knobs.max_num_seqs = int(v); }},
        {"max_num_batched_tokens", 1, 1 << 20,
         [](const EngineSettings& s) { return int64_t(s.knobs.max_num_batched_tokens); },
         [](EngineSettings& s, int64_t v) { s.knobs.max_num_batched_tokens = int(v); }},
        {"long_prefill_token_threshold", 0, 1 << 20,
         [](const EngineSettings& s) { return int64_t(s.knobs.long_prefill_token_threshold); },
         [](EngineSettings& s, int64_t v) { s.knobs.long_prefill_token_threshold = int(v); }},
        {"max_waiting_requests", 1, 1 << 24,
         [](const EngineSettings& s) { return int64_t(s.knobs.max_waiting_requests); },
         [](EngineSettings& s, int64_t v) { s.knobs.max_waiting_requests = int(v); }},
        {"max_waiting_tokens", 1, int64_t(1) << 40,
         [](const EngineSettings& s) { return s.knobs.max_waiting_tokens; },
         [](EngineSettings& s, int64_t v) { s.knobs.max_waiting_tokens = v; }},
        {"block_size", 8, 128, [](const EngineSettings& s) { return int64_t(s.layout.block_size); },
         [](EngineSettings& s, int64_t v) { s.layout.block_size = int(v); }},
        {"kv_cache_memory", 1 << 20, int64_t(1) << 44,
         [](const EngineSettings& s) { return s.layout.kv_cache_memory_bytes; },
         [](EngineSettings& s, int64_t v) { s.layout.kv_cache_memory_bytes = v; }},
    };
    return keys;
}

const IntKey* find_int_key(const std::string& name) {
    for (const auto& k : int_keys()) {
        if (name == k.name) return &k;
    }
    return nullptr;
}

std::string known_keys() {
    std::string out;
    for (const auto& k : setting_keys()) out += (out.empty() ? "" : ", ") + k;
    return out;
}

Status set_one(EngineSettings& s, const std::string& key, const json& v) {
    if (key == "kv_cache_dtype") {
        if (!v.is_string()) {
            return make_error(ErrorCode::kInvalidArgument,
                              "'kv_cache_dtype' must be a string (f32, f16 or bf16), got {}",
                              v.dump());
        }
        auto d = kvcache::parse_kv_dtype(v.get<std::string>());
        if (!d.ok()) {
            return make_error(ErrorCode::kInvalidArgument, "'kv_cache_dtype': {}",
                              d.error().message);
        }
        s.layout.kv_cache_dtype = *d;
        return ok_status();
    }
    const IntKey* k = find_int_key(key);
    if (k == nullptr) {
        return make_error(ErrorCode::kInvalidArgument, "unknown setting '{}' (known: {})", key,
                          known_keys());
    }
    int64_t x = 0;
    if (key == "kv_cache_memory" && v.is_string()) {  // units, as --kv-cache-memory takes them
        auto b = parse_memory(v.get<std::string>());
        if (!b.ok())
            return make_error(ErrorCode::kInvalidArgument, "'{}': {}", key, b.error().message);
        x = *b;
    } else if (!v.is_number_integer()) {
        return make_error(ErrorCode::kInvalidArgument, "'{}' must be an integer{}, got {}", key,
                          key == "kv_cache_memory" ? " (bytes) or a size such as \"4GiB\"" : "",
                          v.dump());
    } else {
        x = v.get<int64_t>();
    }
    if (x < k->min || x > k->max) {
        return make_error(ErrorCode::kOutOfRange, "'{}' = {} is out of range [{}, {}]", key, x,
                          k->min, k->max);
    }
    k->set(s, x);
    return ok_status();
}

}  // namespace

const std::vector<std::string>& setting_keys() {
    static const std::vector<std::string> keys = [] {
        std::vector<std::string> v;
        for (const auto& k : int_keys()) v.emplace_back(k.name);
        v.emplace_back("kv_cache_dtype");
        return v;
    }();
    return keys;
}

bool EngineSettings::operator==(const EngineSettings& o) const { return to_json() == o.to_json(); }

Status EngineSettings::validate() const {
    PAGODA_TRY(knobs.validate());
    kvcache::KvCacheConfig kv;
    kv.block_size = layout.block_size;
    kv.dtype = layout.kv_cache_dtype;
    kv.memory_bytes = layout.kv_cache_memory_bytes;
    if (Status st = kv.validate(); !st.ok()) {
        return make_error(ErrorCode::kInvalidArgument, "'block_size' = {}: {}", layout.block_size,
                          st.error().message);
    }
    return ok_status();
}

json EngineSettings::to_json() const {
    json j = json::object();
    for (const auto& k : int_keys()) j[k.name] = k.get(*this);
    j["kv_cache_dtype"] = kvcache::kv_dtype_name(layout.kv_cache_dtype);
    return j;
}

EngineSettings EngineSettings::of(const engine::Engine& e) {
    EngineSettings s;
    s.knobs = e.knobs();
    const kvcache::KvCacheConfig kv = e.kv_config();
    s.layout.block_size = kv.block_size;
    s.layout.kv_cache_dtype = kv.dtype;
    s.layout.kv_cache_memory_bytes = kv.memory_bytes;
    return s;
}

Result<EngineSettings> apply_patch(const EngineSettings& base, const json& patch) {
    if (!patch.is_object()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "the settings must be a JSON object of keys ({}), got {}", known_keys(),
                          patch.type_name());
    }
    EngineSettings s = base;
    for (const auto& [key, v] : patch.items()) PAGODA_TRY(set_one(s, key, v));
    PAGODA_TRY(s.validate());
    return s;
}

json diff(const EngineSettings& from, const EngineSettings& to) {
    const json a = from.to_json(), b = to.to_json();
    json d = json::object();
    for (const auto& [k, v] : b.items()) {
        if (a.value(k, json()) != v) d[k] = {{"from", a.value(k, json())}, {"to", v}};
    }
    return d;
}

}  // namespace pagoda::control
