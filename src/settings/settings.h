#pragma once
// The engine's settings, each declared once (as vLLM generates its CLI from CacheConfig and
// SchedulerConfig): name, type, unit parser, range or allowed set, default, whether it can
// change on a running replica, help, and `pagoda tune`'s grid. The command-line flags, the
// TOML config file (`--config`), `PUT /admin/config` and `/admin/knobs`, the alert rules'
// knob steps, `pagoda tune`'s search space, the scheduler's and KV cache's own checks and
// the settings table in docs/operations.md all read this table; every path that takes a
// value goes through parse_text or parse_json, so a bad value gets the same message from
// each. Pure values; thread-safe.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace pagoda::settings {

// The KV block sizes the attention kernels and block manager support.
inline constexpr int kBlockSizes[] = {8, 16, 32, 48, 64, 128};

enum class Kind {
    kInt,     // an integer within [min, max] (and one of int_choices when given)
    kBytes,   // a memory size: bytes, "512MiB", "2GiB", or a fraction of RAM ("0.2")
    kBool,    // true/false
    kChoice,  // one of `choices` (each "name|alias|...")
};

enum class Scope {
    kKnob,     // applied by the engine between two steps
    kLayout,   // applied by a KV re-layout (pauses the engine for the copy)
    kStartup,  // fixed for the life of the process
};

struct Spec {
    std::string_view name;  // vLLM's name with underscores: max_num_seqs
    Kind kind = Kind::kInt;
    Scope scope = Scope::kStartup;
    std::string_view default_text;  // as a flag would spell it
    int64_t min = 0, max = 0;       // kInt, kBytes
    std::vector<int64_t> int_choices = {};
    std::vector<std::string_view> choices = {};  // kChoice: "canonical|alias|..."
    std::string_view help = "";
    std::string_view group = "Engine";    // --help's group
    std::string_view short_alias = "";    // "-t", "--tp"
    std::vector<int64_t> tune_grid = {};  // `pagoda tune`'s default values; empty = not searched

    std::string flag() const;  // "--max-num-seqs"
    bool live() const { return scope != Scope::kStartup; }
    std::string allowed() const;  // "[1, 65536]", "8, 16, 32", "true or false"
};

// A parsed value: `number` for kInt, kBytes and kBool (0/1), `text` for kChoice (canonical).
struct Value {
    int64_t number = 0;
    std::string text = "";
    bool operator==(const Value&) const = default;
};

const std::vector<Spec>& all();
const Spec* find(std::string_view name);  // by name, or by flag ("--block-size", "block-size")
// The named spec, or "unknown setting 'x' (known: ...)" listing those `filter` keeps.
Result<const Spec*> lookup(std::string_view name, bool (*filter)(const Spec&) = nullptr);
std::string names(bool (*filter)(const Spec&) = nullptr);  // "a, b, c"

bool is_knob(const Spec& s);  // scope kKnob
bool is_live(const Spec& s);  // scope kKnob or kLayout

// The value as a person types it (flags, TOML scalars): "64", "4GiB", "f16", "true".
Result<Value> parse_text(const Spec& s, std::string_view text);
// A JSON value (PUT /admin/config, /admin/knobs, TOML read as JSON): integers stay
// integers, a size may be a string with units; a string where an integer is due is refused.
Result<Value> parse_json(const Spec& s, const nlohmann::json& v);
// The range or set check alone, for values built in code (RuntimeKnobs::validate).
Status check(const Spec& s, int64_t v);
Status check(std::string_view name, int64_t v);

Value default_value(const Spec& s);
int64_t default_int(std::string_view name);  // a kInt/kBytes/kBool default; aborts if unknown
std::string default_string(std::string_view name);

nlohmann::json to_json(const Spec& s, const Value& v);

// The docs' settings table (Markdown), generated so it cannot drift.
std::string markdown_table();

}  // namespace pagoda::settings
