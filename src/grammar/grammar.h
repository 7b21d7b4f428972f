#pragma once
// Grammars for constrained decoding (level 2, beside the tokenizer): a GBNF-style language
// (`root ::= "a" [0-9]+ | other`, char classes with ranges and negation, groups, `* + ?`
// and `{m,n}`, `#` comments) compiled into rules over Unicode code points, a Matcher that
// holds one sequence's parse state (a set of stacks; UTF-8 bytes may split characters
// across tokens), and token masks: which tokens of a vocabulary keep the text valid,
// computed over a byte trie of the vocabulary so that shared prefixes are walked once.
//
// Left recursion (also through rules that can match nothing) is refused when the grammar
// is compiled, so advancing always terminates.

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"

namespace pagoda::grammar {

// One element of an alternative: a character class or a reference to a rule.
struct Element {
    enum Kind { kChars, kRule } kind = kChars;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // kChars: inclusive code point ranges
    bool negated = false;                               // kChars: [^...]
    int rule = -1;                                      // kRule
    bool matches(uint32_t cp) const;
    bool intersects(uint32_t lo, uint32_t hi) const;  // some code point in [lo, hi] matches
};
using Alternative = std::vector<Element>;
struct Rule {
    std::string name;
    std::vector<Alternative> alts;
};

struct Grammar {
    std::vector<Rule> rules;
    int root = 0;
};

// Parses GBNF text; errors name the line and what was expected.
Result<std::shared_ptr<const Grammar>> parse_gbnf(std::string_view text,
                                                  std::string_view root = "root");

// Whether some text matches at all (every rule it needs can finish).
bool accepts_something(const Grammar& g);

// A GBNF string literal that matches exactly `text`.
std::string gbnf_literal(std::string_view text);
// A regular expression (whole-output match) as GBNF (rule `root`); regex.cpp lists what
// is supported, and errors name what is not.
Result<std::string> regex_to_gbnf(std::string_view pattern);

// The bytes of every token of a vocabulary, as a trie (built once per vocabulary).
class TokenTrie {
  public:
    explicit TokenTrie(const std::vector<std::string>& token_bytes);
    struct Node {
        std::vector<std::pair<uint8_t, int32_t>> next;  // byte -> child node
        std::vector<int32_t> tokens;                    // tokens that end here
    };
    const std::vector<Node>& nodes() const { return nodes_; }
    size_t vocab_size() const { return vocab_size_; }

  private:
    std::vector<Node> nodes_;
    size_t vocab_size_ = 0;
};

// Masks already computed for a grammar on a vocabulary, by parse position: the allowed
// tokens depend only on the position (the stacks), and decoding revisits positions all
// the time (every character inside a JSON string leaves the same one). Shared by the
// sequences of a grammar; thread-safe. Masks are kept as bitsets (a 128k vocabulary: 16 KiB
// each), at most `capacity` of them and `max_bytes` in all (the oldest dropped first).
class MaskCache {
  public:
    explicit MaskCache(size_t capacity = 1024, size_t max_bytes = size_t(8) << 20)
        : capacity_(capacity), max_bytes_(max_bytes) {}
    bool find(const std::string& key, std::vector<uint8_t>& mask) const;
    void put(const std::string& key, const std::vector<uint8_t>& mask);
    size_t size() const;
    size_t bytes() const;  // held by the masks and their keys
    uint64_t hits() const;

  private:
    size_t capacity_, max_bytes_, bytes_ = 0;
    mutable std::mutex mu_;
    struct Entry {
        std::vector<uint64_t> bits;
        size_t size = 0;  // tokens
    };
    std::unordered_map<std::string, Entry> masks_;
    std::deque<std::string> order_;
    mutable uint64_t hits_ = 0;
};

// One sequence's position in a grammar.
class Matcher {
  public:
    explicit Matcher(std::shared_ptr<const Grammar> g);

    // Advances over `bytes`; false (and no change) when they break the grammar.
    bool accept(std::string_view bytes);
    // The text so far is a complete match (end of sequence may come now).
    bool can_end() const;
    // No continuation at all: only the end is possible (or nothing, if !can_end()).
    bool done() const { return stacks_.empty(); }
    // mask[t] = 1 where token t's bytes keep the text a valid prefix (EOS not included).
    // With a cache, a position seen before costs a lookup.
    void fill_mask(const TokenTrie& trie, std::vector<uint8_t>& mask,
                   MaskCache* cache = nullptr) const;
    // The parse position as bytes (equal keys, equal masks).
    std::string position_key() const;

    using Frame = std::pair<int32_t, int32_t>;  // (rule * kMaxAlts + alt, index in the alt)
    using Stack = std::vector<Frame>;

  private:
    struct State {
        std::vector<Stack> stacks;  // each topped by a character element
        bool accepting = false;
        std::string partial;  // bytes of a character not yet complete
    };
    bool advance_byte(State& st, uint8_t b) const;
    static std::string state_key(const std::vector<Stack>& stacks, bool accepting,
                                 const std::string& partial);
    static constexpr int32_t kUnknownMove = -2, kNoMove = -1;
    struct WalkStates;  // matcher.cpp
    void walk(const TokenTrie& trie, int32_t node, int32_t state, WalkStates& ws,
              std::vector<uint8_t>& mask) const;

    std::shared_ptr<const Grammar> g_;
    std::vector<Stack> stacks_;
    bool accepting_ = false;
    std::string partial_;
};

}  // namespace pagoda::grammar
