// EngineSettings: the live settings as one value, read and patched by the settings table.
#include "control/config/engine_settings.h"

#include <fmt/core.h>

#include <limits>

#include "settings/settings.h"

namespace pagoda::control {

namespace {

// The KV layout's fields, by their settings names (settings::Scope::kLayout).
Status set_layout(KvLayout& l, const settings::Spec& spec, const settings::Value& v,
                  kvcache::KvDtype auto_dtype) {
    if (spec.name == "block_size") {
        l.block_size = int(v.number);
    } else if (spec.name == "kv_cache_memory") {
        l.kv_cache_memory_bytes = v.number;
    } else if (spec.name == "kv_cache_dtype") {
        if (v.text == "auto") {
            l.kv_cache_dtype = auto_dtype;
        } else {
            PAGODA_ASSIGN_OR_RETURN(l.kv_cache_dtype, kvcache::parse_kv_dtype(v.text));
        }
    } else {
        return make_error(ErrorCode::kInternal, "layout setting '{}' has no field", spec.name);
    }
    return ok_status();
}

json layout_value(const KvLayout& l, const settings::Spec& spec) {
    if (spec.name == "block_size") return l.block_size;
    if (spec.name == "kv_cache_memory") return l.kv_cache_memory_bytes;
    return kvcache::kv_dtype_name(l.kv_cache_dtype);
}

Status set_one(EngineSettings& s, const std::string& key, const json& v,
               kvcache::KvDtype auto_dtype) {
    const settings::Spec* spec = settings::find(key);
    if (spec != nullptr && !spec->live()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "'{}' cannot change on a running replica; restart it with {}", key,
                          spec->flag());
    }
    PAGODA_ASSIGN_OR_RETURN(spec, settings::lookup(key, settings::is_live));
    PAGODA_ASSIGN_OR_RETURN(settings::Value x, settings::parse_json(*spec, v));
    if (settings::is_knob(*spec)) {
        s.knobs.set(spec->name, x.number);
        return ok_status();
    }
    return set_layout(s.layout, *spec, x, auto_dtype);
}

}  // namespace

const std::vector<std::string>& setting_keys() {
    static const std::vector<std::string> keys = [] {
        std::vector<std::string> v;
        for (const settings::Spec& s : settings::all()) {
            if (s.live()) v.emplace_back(s.name);
        }
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
    return kv.validate();
}

json EngineSettings::to_json() const {
    json j = json::object();
    for (const settings::Spec& s : settings::all()) {
        if (settings::is_knob(s)) j[std::string(s.name)] = *knobs.get(s.name);
        if (s.scope == settings::Scope::kLayout) j[std::string(s.name)] = layout_value(layout, s);
    }
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

Result<EngineSettings> apply_patch(const EngineSettings& base, const json& patch,
                                   kvcache::KvDtype auto_dtype) {
    if (!patch.is_object()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "the settings must be a JSON object of keys ({}), got {}",
                          settings::names(settings::is_live), patch.type_name());
    }
    EngineSettings s = base;
    for (const auto& [key, v] : patch.items()) PAGODA_TRY(set_one(s, key, v, auto_dtype));
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
