// Vocab: the implementation (the contract is in tokenizer/vocab.h).
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cstdio>

namespace pagoda::tokenizer {
namespace {

Result<const formats::GgufValue*> find_array(const formats::GgufFile& g, const std::string& key,
                                             formats::GgufType elem, bool required) {
    const formats::GgufValue* v = g.find(key);
    if (!v) {
        if (required)
            return make_error(ErrorCode::kInvalidFile, "{}: missing tokenizer key '{}'", g.source(),
                              key);
        return static_cast<const formats::GgufValue*>(nullptr);
    }
    if (v->type != formats::GgufType::kArray || (v->elem_type != elem && !v->array.empty())) {
        // Allow any numeric element type for numbers (some converters write i32 vs u32).
        const bool numeric_ok =
            v->type == formats::GgufType::kArray && elem != formats::GgufType::kString &&
            v->elem_type != formats::GgufType::kString && v->elem_type != formats::GgufType::kArray;
        if (!numeric_ok) {
            return make_error(ErrorCode::kInvalidFile,
                              "{}: tokenizer key '{}' should be an array of {}", g.source(), key,
                              formats::gguf_type_name(elem));
        }
    }
    return v;
}

}  // namespace

// tokenizer.ggml.scores and .token_type, one per token (defaults when absent).
static Status read_scores_and_types(const formats::GgufFile& g, Vocab& v) {
    const size_t n = v.tokens.size();
    PAGODA_ASSIGN_OR_RETURN(const formats::GgufValue* scores,
                            find_array(g, "tokenizer.ggml.scores", formats::GgufType::kF32, false));
    v.scores.assign(n, 0.0f);
    if (scores) {
        if (scores->array.size() != n) {
            return make_error(ErrorCode::kInvalidFile, "{}: {} scores for {} tokens", g.source(),
                              scores->array.size(), n);
        }
        for (size_t k = 0; k < n; ++k)
            v.scores[k] = float(scores->array[k].as_double().value_or(0.0));
    }
    PAGODA_ASSIGN_OR_RETURN(
        const formats::GgufValue* types,
        find_array(g, "tokenizer.ggml.token_type", formats::GgufType::kI32, false));
    v.types.assign(n, TokenType::kNormal);
    if (types) {
        if (types->array.size() != n) {
            return make_error(ErrorCode::kInvalidFile, "{}: {} token types for {} tokens",
                              g.source(), types->array.size(), n);
        }
        for (size_t k = 0; k < n; ++k) {
            const int64_t t = types->array[k].as_int().value_or(1);
            v.types[k] = (t >= 0 && t <= 6) ? TokenType(t) : TokenType::kUndefined;
        }
    }
    return ok_status();
}

// Byte-level BPE's merges: "left right" pairs, ranked by their order.
static Status read_merges(const formats::GgufFile& g, Vocab& v) {
    PAGODA_ASSIGN_OR_RETURN(
        const formats::GgufValue* merges,
        find_array(g, "tokenizer.ggml.merges", formats::GgufType::kString, true));
    v.merge_rank.reserve(merges->array.size());
    for (size_t k = 0; k < merges->array.size(); ++k) {
        const std::string& m = merges->array[k].s;
        const size_t sp = m.find(' ', 1);
        if (sp == std::string::npos) {
            return make_error(ErrorCode::kInvalidFile, "{}: merge {} ('{}') has no space separator",
                              g.source(), k, m);
        }
        v.merge_rank.emplace(std::make_pair(m.substr(0, sp), m.substr(sp + 1)), int32_t(k));
    }
    return ok_status();
}

// BOS, EOS, UNK, PAD and EOT ids (the end-of-turn token by its text when not named).
static void read_special_ids(const formats::GgufFile& g, Vocab& v) {
    const size_t n = v.tokens.size();
    auto special = [&](const char* key, TokenId dflt) -> TokenId {
        const int64_t id = g.get_int_or(key, dflt);
        return (id >= 0 && id < int64_t(n)) ? TokenId(id) : kNoToken;
    };
    const bool spm = v.kind == TokenizerKind::kSpm;
    v.bos = special("tokenizer.ggml.bos_token_id", spm ? 1 : 11);
    v.eos = special("tokenizer.ggml.eos_token_id", spm ? 2 : 11);
    v.unk = special("tokenizer.ggml.unknown_token_id", spm ? 0 : -1);
    v.pad = special("tokenizer.ggml.padding_token_id", -1);
    v.eot = special("tokenizer.ggml.eot_token_id", -1);
    if (v.eot == kNoToken) {
        for (const char* t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>"}) {
            auto it = v.token_to_id.find(t);
            if (it != v.token_to_id.end()) {
                v.eot = it->second;
                break;
            }
        }
    }
}

Result<Vocab> Vocab::from_gguf(const formats::GgufFile& g) {
    Vocab v;
    PAGODA_ASSIGN_OR_RETURN(v.model_name, g.get_string("tokenizer.ggml.model"));
    if (v.model_name == "llama") {
        v.kind = TokenizerKind::kSpm;
    } else if (v.model_name == "gpt2") {
        v.kind = TokenizerKind::kBpe;
    } else {
        return make_error(ErrorCode::kUnsupported,
                          "{}: tokenizer model '{}' is not supported (supported: llama, gpt2)",
                          g.source(), v.model_name);
    }
    v.pre = g.get_string_or("tokenizer.ggml.pre", "default");

    PAGODA_ASSIGN_OR_RETURN(
        const formats::GgufValue* toks,
        find_array(g, "tokenizer.ggml.tokens", formats::GgufType::kString, true));
    if (toks->array.empty())
        return make_error(ErrorCode::kInvalidFile, "{}: empty token list", g.source());
    v.tokens.reserve(toks->array.size());
    for (const auto& t : toks->array) v.tokens.push_back(t.s);
    const size_t n = v.tokens.size();

    PAGODA_TRY(read_scores_and_types(g, v));
    for (size_t k = 0; k < n; ++k) {
        v.token_to_id.emplace(v.tokens[k], TokenId(k));
        v.max_token_bytes = std::max(v.max_token_bytes, v.tokens[k].size());
    }

    if (v.kind == TokenizerKind::kBpe) PAGODA_TRY(read_merges(g, v));

    read_special_ids(g, v);
    const bool spm = v.kind == TokenizerKind::kSpm;
    v.add_bos = g.get_bool_or("tokenizer.ggml.add_bos_token", spm);
    v.add_eos = g.get_bool_or("tokenizer.ggml.add_eos_token", false);
    v.add_space_prefix = g.get_bool_or("tokenizer.ggml.add_space_prefix", spm);
    v.chat_template = g.get_string_or("tokenizer.chat_template", "");

    for (const auto& [key, bit] :
         {std::pair{"tokenizer.pagoda.lstrip", 1}, {"tokenizer.pagoda.rstrip", 2}}) {
        const formats::GgufValue* a = g.find(key);
        if (!a || a->type != formats::GgufType::kArray) continue;
        for (const auto& e : a->array) {
            const auto id = e.as_int();
            if (!id || *id < 0 || *id >= int64_t(n)) continue;
            if (v.strip.empty()) v.strip.assign(n, 0);
            v.strip[size_t(*id)] |= uint8_t(bit);
        }
    }
    v.byte_tokens.assign(256, kNoToken);
    if (spm) {
        for (int b = 0; b < 256; ++b) {
            char name[8];
            std::snprintf(name, sizeof name, "<0x%02X>", b);
            auto it = v.token_to_id.find(name);
            if (it != v.token_to_id.end()) v.byte_tokens[size_t(b)] = it->second;
        }
    }
    for (size_t k = 0; k < n; ++k) {
        if ((v.types[k] == TokenType::kControl || v.types[k] == TokenType::kUserDefined ||
             v.types[k] == TokenType::kUnknown) &&
            !v.tokens[k].empty()) {
            v.specials.push_back(TokenId(k));
        }
    }
    std::stable_sort(v.specials.begin(), v.specials.end(), [&](TokenId a, TokenId b) {
        return v.tokens[size_t(a)].size() > v.tokens[size_t(b)].size();
    });
    return v;
}

}  // namespace pagoda::tokenizer
