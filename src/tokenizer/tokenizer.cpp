// Tokenizer: the implementation (the contract is in tokenizer/tokenizer.h).
#include "tokenizer/tokenizer.h"

#include <cstdlib>
#include <queue>

#include "base/check.h"
#include "tokenizer/unicode.h"

namespace pagoda::tokenizer {
namespace {

// A symbol in the merge list: a byte range of the working string, linked to neighbours.
struct Symbol {
    int prev;
    int next;
    size_t start;
    size_t len;
    TokenId token = kNoToken;  // SPM: the token whose text this is, when there is one
};

// A candidate merge's priority and, for SPM, the token it makes.
struct Scored {
    double priority;
    TokenId token = kNoToken;
};

uint64_t pair_key(TokenId a, TokenId b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }

// A one- to three-byte UTF-8 character's code point (U+2581, SPM's space, is three), or
// kSpmCharTable when `s` is anything else.
constexpr uint32_t kSpmCharTable = 0x3000;
constexpr std::string_view kSpmSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's space
// Whether the U+2581 at s[p] starts a word: it follows a character other than U+2581 (UTF-8
// is self-synchronising, so the three bytes before spell U+2581 exactly when they are it).
bool word_start(std::string_view s, size_t p) {
    return p > 0 &&
           (p < kSpmSpace.size() || s.substr(p - kSpmSpace.size(), kSpmSpace.size()) != kSpmSpace);
}
uint32_t short_char(std::string_view s) {
    const auto b = [&](size_t i) { return uint32_t(uint8_t(s[i])); };
    if (s.size() == 1 && b(0) < 0x80) return b(0);
    if (s.size() == 2 && (b(0) & 0xE0) == 0xC0 && (b(1) & 0xC0) == 0x80) {
        const uint32_t c = (b(0) & 0x1F) << 6 | (b(1) & 0x3F);
        return c >= 0x80 ? c : kSpmCharTable;  // an overlong form is not that character
    }
    if (s.size() == 3 && (b(0) & 0xF0) == 0xE0 && (b(1) & 0xC0) == 0x80 && (b(2) & 0xC0) == 0x80) {
        const uint32_t c = (b(0) & 0x0F) << 12 | (b(1) & 0x3F) << 6 | (b(2) & 0x3F);
        return c >= 0x800 && c < kSpmCharTable ? c : kSpmCharTable;
    }
    return kSpmCharTable;
}

// Candidate merge of symbols left and left's next. `rank` orders candidates: SPM
// prefers the highest score, BPE the lowest merge rank; ties go to the leftmost.
struct Candidate {
    double priority;  // larger first
    int left;
    size_t len;  // combined byte length when queued; stale if it changed
    TokenId token;
    bool operator<(const Candidate& o) const {
        return priority < o.priority || (priority == o.priority && left > o.left);
    }
};

std::vector<Symbol> split_chars(std::string_view s) {
    std::vector<Symbol> syms;
    syms.reserve(s.size());  // at most one symbol a byte: no regrowth
    size_t i = 0;
    while (i < s.size()) {
        const size_t n = std::min(utf8_lead_len(uint8_t(s[i])), s.size() - i);
        syms.push_back(Symbol{int(syms.size()) - 1, int(syms.size()) + 1, i, n});
        i += n;
    }
    if (!syms.empty()) syms.back().next = -1;
    return syms;
}

// Generic greedy pair-merge over `syms`; `score(a, b)` (two adjacent symbols) returns the
// candidate's priority and token, or nullopt when they cannot merge.
template <typename ScoreFn>
void merge_symbols(std::vector<Symbol>& syms, ScoreFn score) {
    std::vector<Candidate> store;
    store.reserve(syms.size() * 2);  // a pair of neighbours per symbol, and the merges' new ones
    std::priority_queue<Candidate> q(std::less<Candidate>(), std::move(store));
    auto try_add = [&](int left) {
        if (left < 0) return;
        const int right = syms[size_t(left)].next;
        if (right < 0) return;
        const Symbol& a = syms[size_t(left)];
        const Symbol& b = syms[size_t(right)];
        const std::optional<Scored> p = score(a, b);
        if (p) q.push(Candidate{p->priority, left, a.len + b.len, p->token});
    };
    for (size_t k = 0; k + 1 < syms.size(); ++k) try_add(int(k));
    while (!q.empty()) {
        const Candidate c = q.top();
        q.pop();
        Symbol& a = syms[size_t(c.left)];
        if (a.len == 0 || a.next < 0) continue;
        Symbol& b = syms[size_t(a.next)];
        if (a.len + b.len != c.len) continue;  // stale candidate
        a.len += b.len;
        a.token = c.token;
        b.len = 0;
        a.next = b.next;
        if (b.next >= 0) syms[size_t(b.next)].prev = c.left;
        try_add(a.prev);
        try_add(c.left);
    }
}

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const formats::GgufFile& g) {
    Tokenizer t;
    PAGODA_ASSIGN_OR_RETURN(t.vocab_, Vocab::from_gguf(g));
    if (t.vocab_.kind == TokenizerKind::kBpe) {
        auto pre = PreTokenizer::create(t.vocab_.pre);
        if (!pre.ok())
            return make_error(pre.error().code, "{}: {}", g.source(), pre.error().message);
        t.pre_.emplace(std::move(pre).value());
    } else {
        t.build_spm_pairs();
    }
    return t;
}

// Every split of every token's text into two tokens' texts (the id token_to_id gives
// each text, as the merge loop's lookups do), and the tokens of one short character.
void Tokenizer::build_spm_pairs() {
    const auto& ids = vocab_.token_to_id;
    spm_chars_.assign(kSpmCharTable, kNoToken);
    spm_words_ = true;
    word_cache_ = std::make_unique<WordCache>();
    for (const auto& [text, id] : ids) {
        for (size_t p = text.find(kSpmSpace, 1); p != std::string::npos;
             p = text.find(kSpmSpace, p + 1)) {
            if (word_start(text, p)) spm_words_ = false;  // a token crosses a word's start
        }
        const uint32_t c = short_char(text);
        if (c < kSpmCharTable) spm_chars_[c] = id;
        for (size_t i = 1; i < text.size(); ++i) {
            auto l = ids.find(std::string_view(text).substr(0, i));
            if (l == ids.end()) continue;
            auto r = ids.find(std::string_view(text).substr(i));
            if (r != ids.end()) spm_pairs_.emplace(pair_key(l->second, r->second), id);
        }
    }
}

// Word by word where no merge crosses a word's start (spm_words_, which comes with the
// word cache).
void Tokenizer::encode_spm(std::string_view text, std::vector<TokenId>& out) const {
    if (!spm_words_) return encode_spm_piece(text, out);
    std::lock_guard<std::mutex> lock(word_cache_->mu);
    auto word = [&](std::string_view piece) {
        if (piece.size() > WordCache::kMaxWordBytes) return encode_spm_piece(piece, out);
        auto& words = word_cache_->words;
        if (auto it = words.find(piece); it != words.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
        const size_t from = out.size();
        encode_spm_piece(piece, out);
        if (words.size() >= WordCache::kMaxWords) words.clear();
        words.emplace(piece, std::vector<TokenId>(out.begin() + ptrdiff_t(from), out.end()));
    };
    size_t start = 0;
    for (size_t p = text.find(kSpmSpace, 1); p != std::string_view::npos;
         p = text.find(kSpmSpace, p + kSpmSpace.size())) {
        if (!word_start(text, p)) continue;
        word(text.substr(start, p - start));
        start = p;
    }
    word(text.substr(start));
}

void Tokenizer::encode_spm_piece(std::string_view text, std::vector<TokenId>& out) const {
    std::vector<Symbol> syms = split_chars(text);
    const auto& ids = vocab_.token_to_id;
    for (Symbol& c : syms) {
        const std::string_view ch = text.substr(c.start, c.len);
        const uint32_t code = short_char(ch);
        if (code < spm_chars_.size()) {
            c.token = spm_chars_[code];
            continue;
        }
        auto it = ids.find(ch);
        if (it != ids.end()) c.token = it->second;
    }
    const size_t longest = vocab_.max_token_bytes ? vocab_.max_token_bytes : text.size();
    merge_symbols(syms, [&](const Symbol& a, const Symbol& b) -> std::optional<Scored> {
        if (a.len + b.len > longest) return std::nullopt;  // no token is that long
        TokenId t = kNoToken;
        if (a.token != kNoToken && b.token != kNoToken && !spm_pairs_.empty()) {
            auto it = spm_pairs_.find(pair_key(a.token, b.token));
            if (it == spm_pairs_.end()) return std::nullopt;
            t = it->second;
        } else {  // a piece that is no token (byte fallback): by text; adjacent, so one span
            auto it = ids.find(text.substr(a.start, a.len + b.len));
            if (it == ids.end()) return std::nullopt;
            t = it->second;
        }
        return Scored{double(vocab_.scores[size_t(t)]), t};
    });
    for (int k = syms.empty() ? -1 : 0; k >= 0; k = syms[size_t(k)].next) {
        const std::string_view piece = text.substr(syms[size_t(k)].start, syms[size_t(k)].len);
        if (syms[size_t(k)].token != kNoToken) {  // each symbol knows its token, if any
            out.push_back(syms[size_t(k)].token);
            continue;
        }
        for (char c : piece) {  // byte fallback
            const TokenId b = vocab_.byte_tokens[uint8_t(c)];
            if (b != kNoToken) {
                out.push_back(b);
            } else if (vocab_.unk != kNoToken) {
                out.push_back(vocab_.unk);
            }
        }
    }
}

void Tokenizer::encode_bpe_word(std::string_view raw, std::vector<TokenId>& out) const {
    const std::string word = bytes_to_bpe_chars(raw);
    if (pre_->ignore_merges()) {
        auto it = vocab_.token_to_id.find(word);
        if (it != vocab_.token_to_id.end()) {
            out.push_back(it->second);
            return;
        }
    }
    std::vector<Symbol> syms = split_chars(word);
    merge_symbols(syms, [&](const Symbol& a, const Symbol& b) -> std::optional<Scored> {
        auto it = vocab_.merge_rank.find(
            {std::string(word.substr(a.start, a.len)), std::string(word.substr(b.start, b.len))});
        if (it == vocab_.merge_rank.end()) return std::nullopt;
        return Scored{-double(it->second)};
    });
    for (int k = syms.empty() ? -1 : 0; k >= 0; k = syms[size_t(k)].next) {
        const std::string piece(word.substr(syms[size_t(k)].start, syms[size_t(k)].len));
        auto it = vocab_.token_to_id.find(piece);
        if (it != vocab_.token_to_id.end()) {
            out.push_back(it->second);
            continue;
        }
        // Not a token: fall back to one token per character (every byte char is a token).
        for (const Symbol& c : split_chars(piece)) {
            auto ct = vocab_.token_to_id.find(piece.substr(c.start, c.len));
            if (ct != vocab_.token_to_id.end()) {
                out.push_back(ct->second);
            } else if (vocab_.unk != kNoToken) {
                out.push_back(vocab_.unk);
            }
        }
    }
}

void Tokenizer::encode_fragment(std::string_view text, bool first,
                                std::vector<TokenId>& out) const {
    if (vocab_.kind == TokenizerKind::kSpm) {
        std::string escaped;
        escaped.reserve(text.size() + 4);
        if (vocab_.add_space_prefix && first) escaped += kSpmSpace;
        for (char c : text) {
            if (c == ' ') {
                escaped += kSpmSpace;
            } else {
                escaped += c;
            }
        }
        encode_spm(escaped, out);
        return;
    }
    for (std::string_view word : pre_->split(text)) encode_bpe_word(word, out);
}

// The byte length of the White_Space code point at text[at] (Unicode's list, as Rust's
// char::is_whitespace, which Hugging Face's lstrip/rstrip use), or 0.
static size_t whitespace_len(std::string_view text, size_t at) {
    const auto c = uint8_t(text[at]);
    if (c == ' ' || (c >= '\t' && c <= '\r')) return 1;
    if (c < 0xC2) return 0;
    uint32_t cp = 0;
    size_t n = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (at + n > text.size()) return 0;
    cp = c & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
    for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (uint8_t(text[at + i]) & 0x3F);
    const bool ws = cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
                    cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
    return ws ? n : 0;
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, EncodeOptions opts) const {
    std::vector<TokenId> out;
    const bool add = opts.add_special == AddSpecial::kYes;
    if (add && vocab_.add_bos && vocab_.bos != kNoToken) out.push_back(vocab_.bos);

    bool prev_special = true;  // the SentencePiece prefix goes on the first text fragment
    size_t pos = 0;
    while (pos < text.size()) {
        // Find the earliest special-token occurrence (longest first at the same place).
        size_t best_at = std::string_view::npos;
        TokenId best = kNoToken;
        // User-defined tokens (type 4, e.g. the runs of spaces GPT-NeoX/MPT vocabularies add)
        // always match whole, before pre-tokenization, as llama.cpp matches them; control
        // tokens only when the caller asks for special-token parsing.
        for (TokenId id : vocab_.specials) {
            if (opts.parse_special == ParseSpecial::kNo &&
                vocab_.types[size_t(id)] != TokenType::kUserDefined) {
                continue;
            }
            const size_t at = text.find(vocab_.tokens[size_t(id)], pos);
            if (at != std::string_view::npos &&
                (best_at == std::string_view::npos || at < best_at)) {
                best_at = at;
                best = id;
            }
        }
        size_t end = best_at == std::string_view::npos ? text.size() : best_at;
        const uint8_t strip =
            best != kNoToken && !vocab_.strip.empty() ? vocab_.strip[size_t(best)] : 0;
        if (strip & 1) {  // lstrip: the whitespace before the token goes with it
            while (end > pos) {
                size_t k = end - 1;  // the start of the code point before `end`
                while (k > pos && (uint8_t(text[k]) & 0xC0) == 0x80) --k;
                if (whitespace_len(text, k) != end - k) break;
                end = k;
            }
        }
        if (end > pos) {
            encode_fragment(text.substr(pos, end - pos), prev_special, out);
            prev_special = false;
        }
        if (best == kNoToken) break;
        out.push_back(best);
        prev_special = true;
        pos = best_at + vocab_.tokens[size_t(best)].size();
        if (strip & 2) {  // rstrip: and the whitespace after it
            for (size_t w; pos < text.size() && (w = whitespace_len(text, pos)) > 0;) pos += w;
        }
    }
    if (add && vocab_.add_eos && vocab_.eos != kNoToken) out.push_back(vocab_.eos);
    return out;
}

std::string Tokenizer::token_bytes(TokenId id, SkipSpecial skip) const {
    if (!vocab_.valid(id)) return {};
    const std::string& text = vocab_.tokens[size_t(id)];
    const TokenType type = vocab_.types[size_t(id)];
    if (type == TokenType::kControl || type == TokenType::kUnknown) {
        return skip == SkipSpecial::kYes ? std::string() : text;
    }
    if (vocab_.kind == TokenizerKind::kSpm) {
        if (type == TokenType::kByte && text.size() == 6 && text.compare(0, 3, "<0x") == 0) {
            // "<0xNN>": the byte itself (decoded on every streamed token, so no table scan).
            // A malformed name from a crafted file falls through to the plain text below.
            char* end = nullptr;
            const std::string hex = text.substr(3, 2);
            const long b = std::strtol(hex.c_str(), &end, 16);
            if (end == hex.c_str() + 2 && text[5] == '>') return std::string(1, char(b));
        }
        std::string out;
        out.reserve(text.size());
        for (size_t i = 0; i < text.size();) {
            if (text.compare(i, 3, "\xe2\x96\x81") == 0) {
                out += ' ';
                i += 3;
            } else {
                out += text[i++];
            }
        }
        return out;
    }
    if (type == TokenType::kUserDefined) return text;
    std::string out;
    if (!bpe_chars_to_bytes(text, out)) return text;
    return out;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, SkipSpecial skip) const {
    std::string out;
    bool first_text = true;
    for (TokenId id : ids) {
        std::string piece = token_bytes(id, skip);
        if (piece.empty()) continue;
        if (first_text && vocab_.kind == TokenizerKind::kSpm && vocab_.add_space_prefix &&
            piece[0] == ' ') {
            piece.erase(0, 1);
        }
        first_text = false;
        out += piece;
    }
    return out;
}

}  // namespace pagoda::tokenizer
