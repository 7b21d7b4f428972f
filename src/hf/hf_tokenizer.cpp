// write_tokenizer: the implementation (the contract is in hf/hf_tokenizer.h).
#include "hf/hf_tokenizer.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "formats/gguf.h"

namespace pagoda::hf {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

Result<json> read_json(const std::string& path, bool required) {
    std::ifstream in(path);
    if (!in) {
        if (!required) return json();
        return make_error(ErrorCode::kNotFound,
                          "{}: not found (pass --tokenizer DIR_OR_GGUF for a directory that "
                          "ships weights without a tokenizer)",
                          path);
    }
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded()) return make_error(ErrorCode::kInvalidFile, "{}: not valid JSON", path);
    return j;
}

// Every object in `j` (depth first) whose "type" is `type`.
void find_typed(const json& j, const std::string& type, std::vector<const json*>& out) {
    if (j.is_object()) {
        if (j.contains("type") && j["type"] == type) out.push_back(&j);
        for (const auto& [k, v] : j.items()) find_typed(v, type, out);
    } else if (j.is_array()) {
        for (const auto& v : j) find_typed(v, type, out);
    }
}

bool has_type(const json& j, const std::string& type) {
    std::vector<const json*> v;
    find_typed(j, type, v);
    return !v.empty();
}

// The GGUF pre-tokenizer name of a byte-level tokenizer, from its Split regexes.
Result<std::string> pre_name(const json& pre, const std::string& path) {
    std::vector<const json*> splits;
    find_typed(pre, "Split", splits);
    if (splits.empty()) return std::string("gpt-2");  // ByteLevel's own GPT-2 regex
    std::string re;
    for (const json* s : splits) {
        if (s->contains("pattern") && (*s)["pattern"].contains("Regex"))
            re += (*s)["pattern"]["Regex"].get<std::string>();
    }
    const bool contractions = re.find("'s|'t|'re|'ve|'m|'ll|'d") != std::string::npos ||
                              re.find("'[sS]|'[tT]") != std::string::npos;
    const bool letters = re.find("[^\\r\\n\\p{L}\\p{N}]?\\p{L}+") != std::string::npos;
    if (contractions && letters && re.find("\\p{N}{1,3}") != std::string::npos)
        return std::string("llama-bpe");  // Llama 3
    if (contractions && letters && re.find("|\\p{N}|") != std::string::npos)
        return std::string("qwen2");
    if (re.find(" ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)") != std::string::npos)
        return std::string("gpt-2");
    return make_error(ErrorCode::kUnsupported,
                      "{}: field 'pre_tokenizer' has a Split regex that is not recognised ({}); "
                      "recognised: GPT-2, Llama 3 and Qwen2 patterns",
                      path, re.substr(0, 120));
}

std::string token_text(const json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string())
        return v["content"].get<std::string>();
    return "";
}

Status copy_gguf_tokenizer(const std::string& path, formats::GgufWriter& w) {
    PAGODA_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(path));
    PAGODA_ASSIGN_OR_RETURN(formats::GgufFile g, formats::GgufFile::parse(f.bytes(), path));
    bool any = false;
    for (const auto& [k, v] : g.metadata()) {
        if (k.rfind("tokenizer.", 0) == 0) {
            w.add(k, v);
            any = true;
        }
    }
    if (!any) return make_error(ErrorCode::kInvalidFile, "{}: has no tokenizer.* keys", path);
    return ok_status();
}

struct Tok {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::vector<float> scores;
    std::vector<std::string> merges;
    std::map<std::string, int32_t> id;
    std::vector<int32_t> lstrip, rstrip;  // added tokens that swallow whitespace
};

// Vocabulary, merges and added tokens of a BPE model.
Result<Tok> read_vocab(const json& t, const std::string& path, bool spm) {
    const json& m = t["model"];
    if (!m.contains("vocab") || !m["vocab"].is_object())
        return make_error(ErrorCode::kInvalidFile, "{}: field 'model.vocab' is missing", path);
    Tok k;
    int64_t n = 0;
    for (auto& [s, i] : m["vocab"].items()) {
        if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() > (1 << 24))
            return make_error(ErrorCode::kInvalidFile, "{}: model.vocab['{}'] is not an id", path,
                              s);
        n = std::max(n, i.get<int64_t>() + 1);
    }
    if (t.contains("added_tokens") && t["added_tokens"].is_array()) {
        for (const auto& a : t["added_tokens"]) {
            if (a.contains("id") && a["id"].is_number_integer())
                n = std::max(n, a["id"].get<int64_t>() + 1);
        }
    }
    k.tokens.assign(size_t(n), "");
    k.types.assign(size_t(n), 5);  // unused until named
    for (auto& [s, i] : m["vocab"].items()) {
        k.tokens[size_t(i.get<int64_t>())] = s;
        k.types[size_t(i.get<int64_t>())] = 1;
    }
    for (int64_t i = 0; i < n; ++i) {
        if (k.tokens[size_t(i)].empty()) k.tokens[size_t(i)] = fmt::format("[PAD{}]", i);
    }
    if (m.contains("merges") && m["merges"].is_array()) {
        for (const auto& e : m["merges"]) {
            if (e.is_string()) {
                k.merges.push_back(e.get<std::string>());
            } else if (e.is_array() && e.size() == 2) {
                k.merges.push_back(e[0].get<std::string>() + " " + e[1].get<std::string>());
            }
        }
    }
    if (t.contains("added_tokens") && t["added_tokens"].is_array()) {
        for (const auto& a : t["added_tokens"]) {
            const int64_t i = a.value("id", int64_t(-1));
            if (i < 0) continue;
            k.tokens[size_t(i)] = a.value("content", k.tokens[size_t(i)]);
            k.types[size_t(i)] = a.value("special", false) ? 3 : 4;
            if (a.value("lstrip", false)) k.lstrip.push_back(int32_t(i));
            if (a.value("rstrip", false)) k.rstrip.push_back(int32_t(i));
        }
    }
    for (int64_t i = 0; i < n; ++i) k.id[k.tokens[size_t(i)]] = int32_t(i);
    if (spm) {  // byte tokens, unknown, and scores from the merge ranks
        k.scores.assign(size_t(n), 0.0f);
        for (int64_t i = 0; i < n; ++i) {
            const std::string& s = k.tokens[size_t(i)];
            if (s.size() == 6 && s.rfind("<0x", 0) == 0 && s.back() == '>') k.types[size_t(i)] = 6;
        }
        for (size_t r = 0; r < k.merges.size(); ++r) {
            const std::string& mm = k.merges[r];
            const size_t sp = mm.find(' ');
            auto it = k.id.find(mm.substr(0, sp) + mm.substr(sp + 1));
            if (it != k.id.end() && k.scores[size_t(it->second)] == 0.0f)
                k.scores[size_t(it->second)] = -float(r + 1);
        }
        const std::string unk = m.contains("unk_token") ? token_text(m["unk_token"]) : "<unk>";
        if (k.id.count(unk)) k.types[size_t(k.id[unk])] = 2;
    }
    return k;
}

// BOS/EOS/UNK/PAD/EOT ids and add_bos/add_eos: tokenizer_config.json's names, else the
// post-processor's first special token (add_bos) and generation_config.json's eos ids (EOT
// is the first one that is not the EOS).
void write_special_ids(const json& t, const json& cfg, const json& gen, const Tok& k, bool spm,
                       formats::GgufWriter& w) {
    auto id_of = [&](const std::string& key) -> int64_t {
        if (!cfg.is_object() || !cfg.contains(key)) return -1;
        auto it = k.id.find(token_text(cfg[key]));
        return it == k.id.end() ? -1 : it->second;
    };
    int64_t bos = id_of("bos_token"), eos = id_of("eos_token");
    const int64_t unk = id_of("unk_token"), pad = id_of("pad_token");
    // add_bos: the config's flag, else whether the post-processor puts a special token first.
    bool add_bos = spm;
    if (cfg.is_object() && cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) {
        add_bos = cfg["add_bos_token"].get<bool>();
    } else if (t.contains("post_processor") && t["post_processor"].is_object()) {
        std::vector<const json*> tp;
        find_typed(t["post_processor"], "TemplateProcessing", tp);
        add_bos = false;
        if (!tp.empty() && (*tp[0]).contains("single") && !(*tp[0])["single"].empty() &&
            (*tp[0])["single"][0].contains("SpecialToken")) {
            add_bos = true;
            auto it = k.id.find((*tp[0])["single"][0]["SpecialToken"].value("id", std::string()));
            if (it != k.id.end() && bos < 0) bos = it->second;
        }
    }
    int64_t eot = -1;
    if (gen.is_object() && gen.contains("eos_token_id")) {
        const json& e = gen["eos_token_id"];
        std::vector<int64_t> ids;
        if (e.is_number_integer()) ids.push_back(e.get<int64_t>());
        if (e.is_array()) {
            for (const auto& x : e) {
                if (x.is_number_integer()) ids.push_back(x.get<int64_t>());
            }
        }
        if (eos < 0 && !ids.empty()) eos = ids[0];
        for (int64_t x : ids) {
            if (x != eos && eot < 0) eot = x;
        }
    }
    if (bos < 0 && gen.is_object() && gen.contains("bos_token_id") &&
        gen["bos_token_id"].is_number_integer())
        bos = gen["bos_token_id"].get<int64_t>();
    const int64_t n = int64_t(k.tokens.size());
    auto put = [&](const char* key, int64_t v) {
        if (v >= 0 && v < n) w.add_u32(key, uint32_t(v));
    };
    put("tokenizer.ggml.bos_token_id", bos);
    put("tokenizer.ggml.eos_token_id", eos);
    put("tokenizer.ggml.unknown_token_id", unk);
    put("tokenizer.ggml.padding_token_id", pad);
    put("tokenizer.ggml.eot_token_id", eot);
    w.add_bool("tokenizer.ggml.add_bos_token", add_bos);
    w.add_bool("tokenizer.ggml.add_eos_token",
               cfg.is_object() && cfg.value("add_eos_token", false));
}

// The chat template (a string, or the "default" of a list) and generation_config.json's
// sampling defaults as pagoda.generation.* keys.
void write_template_and_defaults(const json& cfg, const json& gen, bool generation_config,
                                 formats::GgufWriter& w) {
    if (cfg.is_object() && cfg.contains("chat_template")) {
        const json& ct = cfg["chat_template"];
        std::string tmpl;
        if (ct.is_string()) tmpl = ct.get<std::string>();
        if (ct.is_array()) {
            for (const auto& e : ct) {
                if (e.value("name", std::string()) == "default") tmpl = e.value("template", "");
            }
        }
        if (!tmpl.empty()) w.add_string("tokenizer.chat_template", tmpl);
    }
    if (generation_config && gen.is_object()) {
        for (const char* key : {"temperature", "top_p", "top_k", "min_p", "repetition_penalty"}) {
            if (gen.contains(key) && gen[key].is_number())
                w.add_f32(std::string("pagoda.generation.") + key, gen[key].get<float>());
        }
        if (gen.contains("max_new_tokens") && gen["max_new_tokens"].is_number_integer())
            w.add_u32("pagoda.generation.max_new_tokens", gen["max_new_tokens"].get<uint32_t>());
    }
}

}  // namespace

Status write_tokenizer(const std::string& dir, const std::string& override_path, int vocab_rows,
                       bool generation_config, formats::GgufWriter& w) {
    std::string src = dir;
    if (!override_path.empty()) {
        if (fs::is_regular_file(override_path)) return copy_gguf_tokenizer(override_path, w);
        src = override_path;
    }
    const std::string path = src + "/tokenizer.json";
    PAGODA_ASSIGN_OR_RETURN(json t, read_json(path, true));
    PAGODA_ASSIGN_OR_RETURN(json cfg, read_json(src + "/tokenizer_config.json", false));
    PAGODA_ASSIGN_OR_RETURN(json gen, read_json(dir + "/generation_config.json", false));
    if (!t.contains("model") || !t["model"].is_object())
        return make_error(ErrorCode::kInvalidFile, "{}: field 'model' is missing", path);
    const std::string type = t["model"].value("type", std::string("BPE"));
    if (type != "BPE") {
        return make_error(ErrorCode::kUnsupported,
                          "{}: field 'model.type' is '{}', which is not read (supported: BPE, "
                          "byte-level or with byte fallback)",
                          path, type);
    }
    const bool byte_level =
        has_type(t["pre_tokenizer"], "ByteLevel") || has_type(t["decoder"], "ByteLevel");
    const bool spm = !byte_level;
    PAGODA_ASSIGN_OR_RETURN(Tok k, read_vocab(t, path, spm));
    if (vocab_rows > 0 && int64_t(k.tokens.size()) > vocab_rows) {
        return make_error(ErrorCode::kInvalidFile,
                          "{}: {} tokens, but config.json's vocab_size is {}", path,
                          k.tokens.size(), vocab_rows);
    }
    // The token list spans the embedding's rows, as llama.cpp requires: [PAD{i}], unused.
    for (int64_t i = int64_t(k.tokens.size()); i < vocab_rows; ++i) {
        k.tokens.push_back(fmt::format("[PAD{}]", i));
        k.types.push_back(5);
        if (spm) k.scores.push_back(0.0f);
    }
    w.add_string("tokenizer.ggml.model", spm ? "llama" : "gpt2");
    if (byte_level) {
        PAGODA_ASSIGN_OR_RETURN(std::string pre, pre_name(t["pre_tokenizer"], path));
        w.add_string("tokenizer.ggml.pre", pre);
    } else {
        w.add_string("tokenizer.ggml.pre", "default");
        const bool prefix =
            has_type(t["normalizer"], "Prepend") ||
            (has_type(t["pre_tokenizer"], "Metaspace") &&
             t["pre_tokenizer"].value("prepend_scheme", std::string("always")) != "never");
        w.add_bool("tokenizer.ggml.add_space_prefix", prefix);
    }
    w.add_string_array("tokenizer.ggml.tokens", k.tokens);
    w.add_i32_array("tokenizer.ggml.token_type", k.types);
    if (spm) w.add_f32_array("tokenizer.ggml.scores", k.scores);
    if (!k.lstrip.empty()) w.add_i32_array("tokenizer.pagoda.lstrip", k.lstrip);
    if (!k.rstrip.empty()) w.add_i32_array("tokenizer.pagoda.rstrip", k.rstrip);
    if (byte_level) w.add_string_array("tokenizer.ggml.merges", k.merges);
    write_special_ids(t, cfg, gen, k, spm, w);
    write_template_and_defaults(cfg, gen, generation_config, w);
    return ok_status();
}

}  // namespace pagoda::hf
