#pragma once
// Vocab: the tokenizer's data from GGUF metadata (tokens, scores, types, merges,
// special ids, flags). Built once at load; immutable and thread-safe afterwards.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "formats/gguf.h"

namespace pagoda::tokenizer {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

enum class TokenizerKind { kSpm, kBpe };

// GGUF tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
    kUndefined = 0,
    kNormal = 1,
    kUnknown = 2,
    kControl = 3,
    kUserDefined = 4,
    kUnused = 5,
    kByte = 6,
};

// Looks strings up by std::string_view without building a std::string (prompt encoding
// does a lookup per candidate merge).
struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct PairHash {
    size_t operator()(const std::pair<std::string, std::string>& p) const {
        return std::hash<std::string>{}(p.first) * 31 + std::hash<std::string>{}(p.second);
    }
};

struct Vocab {
    TokenizerKind kind = TokenizerKind::kSpm;
    std::string model_name;  // tokenizer.ggml.model
    std::string pre;         // tokenizer.ggml.pre ("default" when absent)
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<TokenType> types;
    std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>> token_to_id;
    size_t max_token_bytes = 0;  // the longest token's text (0: not known)
    std::unordered_map<std::pair<std::string, std::string>, int32_t, PairHash> merge_rank;
    TokenId bos = kNoToken, eos = kNoToken, unk = kNoToken, pad = kNoToken, eot = kNoToken;
    bool add_bos = false;
    bool add_eos = false;
    bool add_space_prefix = true;      // SentencePiece leading-space rule
    std::vector<TokenId> byte_tokens;  // SPM: id of <0xNN> for each byte, or kNoToken
    std::vector<TokenId> specials;     // control, user-defined, unknown; longest text first
    // Added tokens that swallow whitespace before (bit 1) or after (bit 2) them when matched
    // in text (Hugging Face's lstrip/rstrip; tokenizer.pagoda.{l,r}strip). Empty: none.
    std::vector<uint8_t> strip;
    std::string chat_template;  // tokenizer.chat_template, empty if none

    static Result<Vocab> from_gguf(const formats::GgufFile& g);
    int32_t size() const { return int32_t(tokens.size()); }
    bool valid(TokenId id) const { return id >= 0 && id < size(); }
    bool is_control(TokenId id) const { return types[size_t(id)] == TokenType::kControl; }
    // Tokens that end generation: eos, eot.
    bool is_end_of_generation(TokenId id) const {
        return id == eos || (eot != kNoToken && id == eot);
    }
};

}  // namespace pagoda::tokenizer
