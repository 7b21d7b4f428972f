// The settings table and its parsers (settings.h). Add a setting here and every reader
// (flags, config file, admin API, tune, docs) has it.
#include "settings/settings.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "base/units.h"

namespace pagoda::settings {

using json = nlohmann::json;

namespace {

using K = Kind;
using S = Scope;

// Step knobs first: "known: ..." lists start with them.
void add_knobs(std::vector<Spec>& v) {
    v.push_back({.name = "max_num_seqs",
                 .kind = K::kInt,
                 .scope = S::kKnob,
                 .default_text = "256",
                 .min = 1,
                 .max = 65536,
                 .help = "Most sequences in one step",
                 .tune_grid = {16, 32, 64, 128, 256, 512}});
    v.push_back({.name = "max_num_batched_tokens",
                 .kind = K::kInt,
                 .scope = S::kKnob,
                 .default_text = "2048",
                 .min = 1,
                 .max = 1 << 20,
                 .help = "Token budget of one step",
                 .tune_grid = {512, 1024, 2048, 4096, 8192}});
    v.push_back({.name = "long_prefill_token_threshold",
                 .kind = K::kInt,
                 .scope = S::kKnob,
                 .default_text = "0",
                 .min = 0,
                 .max = 1 << 20,
                 .help = "Most tokens one prompt may take in a step; 0 = no cap"});
    v.push_back({.name = "max_waiting_requests",
                 .kind = K::kInt,
                 .scope = S::kKnob,
                 .default_text = "4096",
                 .min = 1,
                 .max = 1 << 24,
                 .help = "Bound of the waiting queue in requests; beyond it requests are refused "
                         "with a retry hint"});
    v.push_back({.name = "max_waiting_tokens",
                 .kind = K::kInt,
                 .scope = S::kKnob,
                 .default_text = "4194304",
                 .min = 1,
                 .max = int64_t(1) << 40,
                 .help = "Bound of the waiting queue in prompt tokens"});
}

// The KV layout: changed live by a re-layout.
void add_layout(std::vector<Spec>& v) {
    v.push_back({.name = "block_size",
                 .kind = K::kInt,
                 .scope = S::kLayout,
                 .default_text = "16",
                 .min = kBlockSizes[0],
                 .max = kBlockSizes[std::size(kBlockSizes) - 1],
                 .int_choices = {std::begin(kBlockSizes), std::end(kBlockSizes)},
                 .help = "KV cache block size in tokens",
                 .tune_grid = {8, 16, 32}});
    v.push_back({.name = "kv_cache_memory",
                 .kind = K::kBytes,
                 .scope = S::kLayout,
                 .default_text = "256MiB",
                 .min = 1,
                 .max = int64_t(1) << 44,
                 .help = "KV cache budget: bytes with unit (512MiB, 2GiB) or a fraction of RAM "
                         "(0.2)"});
    v.push_back(
        {.name = "kv_cache_dtype",
         .kind = K::kChoice,
         .scope = S::kLayout,
         .default_text = "auto",
         .choices = {"auto", "f32|float32", "f16|fp16|float16", "bf16|bfloat16", "q8_0", "q4_0"},
         .help = "KV cache storage; auto: f32 (bf16 with --backend sim). f16 and bf16 "
                 "halve its memory; bf16 on AVX512_BF16 CPUs also runs attention on bf16 "
                 "dot products (long prompts ~1.2-1.3x faster, slightly less accurate); "
                 "q8_0 (llama.cpp's -ctk/-ctv q8_0) takes 0.53x f16's memory and q4_0 "
                 "0.28x (less accurate), head dimension a multiple of 32, CPU only"});
}

// Fixed for the life of the process.
void add_startup(std::vector<Spec>& v) {
    v.push_back({.name = "threads",
                 .kind = K::kInt,
                 .default_text = "0",
                 .min = 0,
                 .max = 1024,
                 .help = "Compute threads; 0 = all cores",
                 .short_alias = "-t"});
    v.push_back({.name = "max_model_len",
                 .kind = K::kInt,
                 .default_text = "0",
                 .min = 0,
                 .max = 1 << 24,
                 .help = "Longest prompt + output in tokens; 0 = the model's context length"});
    v.push_back({.name = "enable_prefix_caching",
                 .kind = K::kBool,
                 .default_text = "true",
                 .help = "Reuse the KV blocks of shared prompt prefixes"});
    v.push_back({.name = "enable_chunked_prefill",
                 .kind = K::kBool,
                 .default_text = "true",
                 .help = "Split long prompts across steps so decodes keep flowing"});
    v.push_back({.name = "tensor_parallel_size",
                 .kind = K::kInt,
                 .default_text = "1",
                 .min = 1,
                 .max = 64,
                 .help = "GPUs one replica spans (tensor parallel); --backend sim only",
                 .group = "Simulated GPU (--backend sim)",
                 .short_alias = "--tp",
                 .tune_grid = {1, 2, 4, 8}});
}

std::string_view canonical(std::string_view choice) { return choice.substr(0, choice.find('|')); }

bool choice_matches(std::string_view choice, std::string_view text) {
    while (!choice.empty()) {
        const size_t bar = choice.find('|');
        if (choice.substr(0, bar) == text) return true;
        if (bar == std::string_view::npos) break;
        choice.remove_prefix(bar + 1);
    }
    return false;
}

// 1048576 -> "1MiB": sizes as the flags take them.
std::string human_bytes(int64_t b) {
    const char* units[] = {"TiB", "GiB", "MiB", "KiB"};
    for (int i = 0; i < 4; ++i) {
        const int64_t unit = int64_t(1) << (40 - 10 * i);
        if (b >= unit && b % unit == 0) return fmt::format("{}{}", b / unit, units[i]);
    }
    return std::to_string(b);
}

std::string noun(const Spec& s) {
    std::string n(s.name);
    std::replace(n.begin(), n.end(), '_', ' ');
    return n;
}

std::string type_error(const Spec& s, const std::string& shown) {
    switch (s.kind) {
        case Kind::kInt: return fmt::format("'{}' must be an integer, got {}", s.name, shown);
        case Kind::kBytes:
            return fmt::format("'{}' must be an integer (bytes) or a size such as \"4GiB\", got {}",
                               s.name, shown);
        case Kind::kBool: return fmt::format("'{}' must be true or false, got {}", s.name, shown);
        case Kind::kChoice:
            return fmt::format("'{}' must be one of {}, got {}", s.name, s.allowed(), shown);
    }
    return "";
}

Result<Value> bad(const std::string& message) {
    return make_error(ErrorCode::kInvalidArgument, "{}", message);
}

Result<Value> checked(const Spec& s, int64_t x) {
    PAGODA_TRY(check(s, x));
    return Value{.number = x};
}

Result<Value> parse_choice(const Spec& s, std::string_view text) {
    for (std::string_view c : s.choices) {
        if (choice_matches(c, text)) return Value{.text = std::string(canonical(c))};
    }
    const std::string shown = json(std::string(text)).dump();
    return bad(fmt::format("'{}' = {}: {} {} is not allowed (allowed: {})", s.name, shown, noun(s),
                           shown, s.allowed()));
}

Result<Value> parse_bytes(const Spec& s, std::string_view text) {
    auto b = parse_memory(std::string(text));
    if (!b.ok()) return bad(fmt::format("'{}': {}", s.name, b.error().message));
    return checked(s, *b);
}

}  // namespace

std::string Spec::flag() const {
    std::string f = "--" + std::string(name);
    std::replace(f.begin(), f.end(), '_', '-');
    return f;
}

std::string Spec::allowed() const {
    std::string out;
    if (kind == Kind::kBool) return "true or false";
    if (kind == Kind::kChoice) {
        for (std::string_view c : choices)
            out += (out.empty() ? "" : ", ") + std::string(canonical(c));
        return out;
    }
    if (!int_choices.empty()) {
        for (int64_t c : int_choices) out += (out.empty() ? "" : ", ") + std::to_string(c);
        return out;
    }
    if (kind == Kind::kBytes) return fmt::format("[{}, {}]", human_bytes(min), human_bytes(max));
    return fmt::format("[{}, {}]", min, max);
}

const std::vector<Spec>& all() {
    static const std::vector<Spec> specs = [] {
        std::vector<Spec> v;
        add_knobs(v);
        add_layout(v);
        add_startup(v);
        return v;
    }();
    return specs;
}

const Spec* find(std::string_view name) {
    std::string n(name.starts_with("--") ? name.substr(2) : name);
    std::replace(n.begin(), n.end(), '-', '_');
    for (const Spec& s : all()) {
        if (s.name == n) return &s;
    }
    return nullptr;
}

bool is_knob(const Spec& s) { return s.scope == Scope::kKnob; }
bool is_live(const Spec& s) { return s.live(); }

std::string names(bool (*filter)(const Spec&)) {
    std::string out;
    for (const Spec& s : all()) {
        if (filter == nullptr || filter(s)) out += (out.empty() ? "" : ", ") + std::string(s.name);
    }
    return out;
}

Result<const Spec*> lookup(std::string_view name, bool (*filter)(const Spec&)) {
    const Spec* s = find(name);
    if (s == nullptr || (filter != nullptr && !filter(*s))) {
        return make_error(ErrorCode::kInvalidArgument, "unknown setting '{}' (known: {})", name,
                          names(filter));
    }
    return s;
}

Status check(const Spec& s, int64_t x) {
    if (!s.int_choices.empty()) {
        if (std::find(s.int_choices.begin(), s.int_choices.end(), x) == s.int_choices.end()) {
            return make_error(ErrorCode::kInvalidArgument,
                              "'{}' = {}: {} {} is not allowed (allowed: {})", s.name, x, noun(s),
                              x, s.allowed());
        }
    } else if (x < s.min || x > s.max) {
        return make_error(ErrorCode::kOutOfRange, "'{}' = {} is out of range {}", s.name, x,
                          s.allowed());
    }
    return ok_status();
}

Status check(std::string_view name, int64_t v) {
    PAGODA_ASSIGN_OR_RETURN(const Spec* s, lookup(name));
    return check(*s, v);
}

Result<Value> parse_text(const Spec& s, std::string_view text) {
    switch (s.kind) {
        case Kind::kChoice: return parse_choice(s, text);
        case Kind::kBytes: return parse_bytes(s, text);
        case Kind::kBool:
            if (text == "true" || text == "1" || text == "on") return Value{.number = 1};
            if (text == "false" || text == "0" || text == "off") return Value{.number = 0};
            return bad(type_error(s, json(std::string(text)).dump()));
        case Kind::kInt: break;
    }
    int64_t x = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
        return bad(type_error(s, json(std::string(text)).dump()));
    }
    return checked(s, x);
}

Result<Value> parse_json(const Spec& s, const json& v) {
    switch (s.kind) {
        case Kind::kChoice:
            if (!v.is_string()) return bad(type_error(s, v.dump()));
            return parse_choice(s, v.get<std::string>());
        case Kind::kBool:
            if (!v.is_boolean()) return bad(type_error(s, v.dump()));
            return Value{.number = v.get<bool>() ? 1 : 0};
        case Kind::kBytes:
            if (v.is_string()) return parse_bytes(s, v.get<std::string>());
            break;
        case Kind::kInt: break;
    }
    if (!v.is_number_integer()) return bad(type_error(s, v.dump()));
    return checked(s, v.get<int64_t>());
}

Value default_value(const Spec& s) {
    auto v = parse_text(s, s.default_text);
    if (!v.ok()) {
        fmt::print(stderr, "settings: the default of '{}' is invalid: {}\n", s.name,
                   v.error().message);
        std::abort();
    }
    return *v;
}

int64_t default_int(std::string_view name) {
    const Spec* s = find(name);
    if (s == nullptr) {
        fmt::print(stderr, "settings: no setting '{}'\n", name);
        std::abort();
    }
    return default_value(*s).number;
}

std::string default_string(std::string_view name) {
    const Spec* s = find(name);
    return s == nullptr ? std::string() : std::string(s->default_text);
}

json to_json(const Spec& s, const Value& v) {
    if (s.kind == Kind::kChoice) return v.text;
    if (s.kind == Kind::kBool) return v.number != 0;
    return v.number;
}

std::string markdown_table() {
    std::string out =
        "| setting | flag | type | allowed | default | changes live | what it does |\n"
        "|---|---|---|---|---|---|---|\n";
    for (const Spec& s : all()) {
        const char* type = s.kind == Kind::kInt     ? "integer"
                           : s.kind == Kind::kBytes ? "size"
                           : s.kind == Kind::kBool  ? "bool"
                                                    : "choice";
        const char* live = s.scope == Scope::kKnob     ? "yes (between steps)"
                           : s.scope == Scope::kLayout ? "yes (KV re-layout)"
                                                       : "no (restart)";
        std::string flag = s.flag();
        if (s.kind == Kind::kBool) flag += ", --no-" + flag.substr(2);
        if (!s.short_alias.empty()) flag += ", " + std::string(s.short_alias);
        out += fmt::format("| `{}` | `{}` | {} | {} | `{}` | {} | {} |\n", s.name, flag, type,
                           s.allowed(), s.default_text, live, s.help);
    }
    return out;
}

}  // namespace pagoda::settings
