#pragma once
// Tokenizer: text <-> token ids for SentencePiece-style ("llama") and byte-level BPE
// ("gpt2") vocabularies read from GGUF. Immutable after load; encode/decode are
// thread-safe. The server and engine call it; it knows nothing about models.

#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "formats/gguf.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab.h"

namespace pagoda::tokenizer {

enum class AddSpecial { kNo, kYes };    // BOS/EOS as the vocab asks
enum class ParseSpecial { kNo, kYes };  // match control/user-defined token text
enum class SkipSpecial { kNo, kYes };   // drop control tokens when decoding

struct EncodeOptions {
    AddSpecial add_special = AddSpecial::kYes;
    ParseSpecial parse_special = ParseSpecial::kNo;
};

class Tokenizer {
  public:
    static Result<Tokenizer> from_gguf(const formats::GgufFile& g);

    std::vector<TokenId> encode(std::string_view text, EncodeOptions opts = {}) const;
    // Whole-sequence decode: drops the SentencePiece prefix space of the first piece.
    std::string decode(std::span<const TokenId> ids, SkipSpecial skip = SkipSpecial::kYes) const;
    // Raw bytes of one token as it appears mid-stream (no prefix-space stripping).
    std::string token_bytes(TokenId id, SkipSpecial skip = SkipSpecial::kYes) const;

    const Vocab& vocab() const { return vocab_; }
    // For tests: SPM candidate merges looked up by text only, over the whole text (the path
    // the pair table and the word split stand in for), to check that both give the same
    // tokens.
    void drop_spm_pairs() {
        spm_pairs_.clear();
        spm_chars_.clear();
        spm_words_ = false;
        word_cache_.reset();
    }
    std::string kind_name() const { return vocab_.model_name; }
    // SPM: whether text is encoded a word at a time (no token crosses a word's start).
    bool spm_word_split() const { return spm_words_; }

  private:
    void build_spm_pairs();
    void encode_spm(std::string_view text, std::vector<TokenId>& out) const;
    void encode_spm_piece(std::string_view text, std::vector<TokenId>& out) const;
    void encode_bpe_word(std::string_view word, std::vector<TokenId>& out) const;
    void encode_fragment(std::string_view text, bool first, std::vector<TokenId>& out) const;

    Vocab vocab_;
    std::optional<PreTokenizer> pre_;  // BPE only
    // SPM: (left id << 32 | right id) -> the token whose text is theirs joined, for every
    // such pair of tokens; candidate merges of two tokens are looked up here by id.
    std::unordered_map<uint64_t, TokenId> spm_pairs_;
    std::vector<TokenId> spm_chars_;  // SPM: code point (below U+3000) -> its token, if any
    // SPM: no token has "▁" after another character than "▁", so no merge crosses
    // the start of a word ("▁" after a character that is not one): words are encoded
    // apart, each with a short merge queue.
    bool spm_words_ = false;
    // SPM words already encoded, by their text (words repeat: a merge queue per word is
    // most of encoding). Bounded: emptied when full. Shared by the threads that encode.
    struct WordCache {
        static constexpr size_t kMaxWords = 1 << 15, kMaxWordBytes = 48;
        std::mutex mu;
        struct Hash {  // looks up by string_view (no string made per word)
            using is_transparent = void;
            size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
        };
        std::unordered_map<std::string, std::vector<TokenId>, Hash, std::equal_to<>> words;
    };
    std::unique_ptr<WordCache> word_cache_;
};

}  // namespace pagoda::tokenizer
