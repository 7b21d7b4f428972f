// The parse state of one sequence: a set of stacks of (rule, alternative, index) frames,
// each expanded until its top is a character element (the frontier), advanced one code
// point at a time. UTF-8 bytes are buffered until a character is complete; an incomplete
// one is kept only if some frontier element accepts a character it could become. Token
// masks walk the vocabulary's byte trie, so tokens sharing a prefix share the work.
#include <algorithm>

#include "grammar/grammar.h"

namespace pagoda::grammar {

namespace {

constexpr int32_t kAltBits = 12;  // alternatives per rule < 4096
constexpr size_t kMaxDepth = 512;

Matcher::Frame frame(int rule, int alt, int idx) { return {int32_t(rule << kAltBits) | alt, idx}; }
int rule_of(const Matcher::Frame& f) { return f.first >> kAltBits; }
int alt_of(const Matcher::Frame& f) { return f.first & ((1 << kAltBits) - 1); }

// Expands `start` until every stack's top is a character element; stacks that finish set
// `accepting`.
void closure(const Grammar& g, Matcher::Stack start, std::vector<Matcher::Stack>& out,
             bool& accepting) {
    std::vector<Matcher::Stack> work{std::move(start)};
    while (!work.empty()) {
        Matcher::Stack s = std::move(work.back());
        work.pop_back();
        if (s.empty()) {
            accepting = true;
            continue;
        }
        const auto [fr, idx] = s.back();
        const Alternative& alt =
            g.rules[size_t(fr >> kAltBits)].alts[size_t(fr & ((1 << kAltBits) - 1))];
        if (size_t(idx) == alt.size()) {
            s.pop_back();
            work.push_back(std::move(s));
            continue;
        }
        const Element& e = alt[size_t(idx)];
        if (e.kind == Element::kChars) {
            out.push_back(std::move(s));
            continue;
        }
        // Past the reference; a finished frame is dropped now (tail calls keep R ::= x R flat).
        if (size_t(idx) + 1 == alt.size()) {
            s.pop_back();
        } else {
            s.back().second = idx + 1;
        }
        if (s.size() >= kMaxDepth) continue;  // nesting beyond any real use: not a path
        const auto& alts = g.rules[size_t(e.rule)].alts;
        for (size_t a = 0; a < alts.size(); ++a) {
            Matcher::Stack t = s;
            t.push_back(frame(e.rule, int(a), 0));
            work.push_back(std::move(t));
        }
    }
}

void dedupe(std::vector<Matcher::Stack>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
}

const Element& top_element(const Grammar& g, const Matcher::Stack& s) {
    const auto& f = s.back();
    return g.rules[size_t(rule_of(f))].alts[size_t(alt_of(f))][size_t(f.second)];
}

size_t utf8_len(uint8_t lead) {
    return lead < 0x80         ? 1
           : (lead >> 5) == 6  ? 2
           : (lead >> 4) == 14 ? 3
           : (lead >> 3) == 30 ? 4
                               : 0;
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {
    const auto& alts = g_->rules[size_t(g_->root)].alts;
    for (size_t a = 0; a < alts.size(); ++a) {
        closure(*g_, Stack{frame(g_->root, int(a), 0)}, stacks_, accepting_);
    }
    dedupe(stacks_);
}

bool Matcher::can_end() const { return accepting_ && partial_.empty(); }

bool Matcher::advance_byte(State& st, uint8_t b) const {
    if (st.partial.empty() && b < 0x80) {
        st.partial.clear();
    } else if (st.partial.empty()) {
        const size_t n = utf8_len(b);
        if (n < 2 || b < 0xC2 || b > 0xF4) return false;  // not a lead byte of valid UTF-8
        st.partial.push_back(char(b));
    } else {
        if ((b & 0xC0) != 0x80) return false;
        st.partial.push_back(char(b));
    }
    // The code points the bytes so far can still become.
    uint32_t lo = 0, hi = 0;
    size_t need = 1;
    if (!st.partial.empty()) {
        const auto lead = static_cast<uint8_t>(st.partial[0]);
        need = utf8_len(lead);
        lo = hi = lead & (0x7F >> need);
        for (size_t k = 1; k < need; ++k) {
            const bool have = k < st.partial.size();
            const uint32_t c = have ? static_cast<uint8_t>(st.partial[k]) & 0x3F : 0;
            lo = (lo << 6) | c;
            hi = (hi << 6) | (have ? c : 0x3F);
        }
    } else {
        lo = hi = b;
    }
    if (!st.partial.empty()) {
        // Only the shortest encoding of a scalar value is UTF-8 (no overlong forms, no
        // surrogates, nothing above U+10FFFF): narrow the range to what the bytes can
        // still become.
        static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
        lo = std::max(lo, kMin[need]);
        hi = std::min<uint32_t>(hi, 0x10FFFF);
        if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return false;
    }
    const bool complete = st.partial.empty() || st.partial.size() == need;
    if (complete && lo >= 0xD800 && lo <= 0xDFFF) return false;
    if (!complete) {
        return std::any_of(st.stacks.begin(), st.stacks.end(),
                           [&](const Stack& s) { return top_element(*g_, s).intersects(lo, hi); });
    }
    st.partial.clear();
    std::vector<Stack> next;
    bool accepting = false;
    for (const Stack& s : st.stacks) {
        if (!top_element(*g_, s).matches(lo)) continue;
        Stack t = s;
        ++t.back().second;
        closure(*g_, std::move(t), next, accepting);
    }
    if (next.empty() && !accepting) return false;
    dedupe(next);
    st.stacks = std::move(next);
    st.accepting = accepting;
    return true;
}

bool Matcher::accept(std::string_view bytes) {
    State st{stacks_, accepting_, partial_};
    for (char c : bytes) {
        if (!advance_byte(st, static_cast<uint8_t>(c))) return false;
    }
    stacks_ = std::move(st.stacks);
    accepting_ = st.accepting;
    partial_ = std::move(st.partial);
    return true;
}

// The states one mask walk meets, interned, with the moves between them found as the walk
// needs them: each (state, byte) is advanced once per walk, however many trie nodes share
// it (inside a JSON string nearly every byte leads back to the same state, and a
// multi-byte character back to the state before it).
struct Matcher::WalkStates {
    std::vector<State> states;
    std::vector<std::array<int32_t, 256>> moves;  // kUnknownMove, kNoMove or a state index
    std::unordered_map<std::string, int32_t> index;
    int32_t intern(State st) {
        std::string key = state_key(st.stacks, st.accepting, st.partial);
        auto [it, fresh] = index.emplace(std::move(key), int32_t(states.size()));
        if (fresh) {
            states.push_back(std::move(st));
            moves.emplace_back().fill(kUnknownMove);
        }
        return it->second;
    }
};

void Matcher::walk(const TokenTrie& trie, int32_t node, int32_t state, WalkStates& ws,
                   std::vector<uint8_t>& mask) const {
    for (const auto& [byte, child] : trie.nodes()[size_t(node)].next) {
        int32_t next = ws.moves[size_t(state)][byte];
        if (next == kUnknownMove) {
            State s2 = ws.states[size_t(state)];
            next = advance_byte(s2, byte) ? ws.intern(std::move(s2)) : kNoMove;
            ws.moves[size_t(state)][byte] = next;
        }
        if (next == kNoMove) continue;
        for (int32_t t : trie.nodes()[size_t(child)].tokens) mask[size_t(t)] = 1;
        if (!trie.nodes()[size_t(child)].next.empty()) walk(trie, child, next, ws, mask);
    }
}

std::string Matcher::state_key(const std::vector<Stack>& stacks, bool accepting,
                               const std::string& partial) {
    std::string key;
    key.reserve(stacks.size() * 32 + partial.size() + 2);
    key += accepting ? 'A' : 'a';
    key += partial;
    key += '|';
    for (const Stack& s : stacks) {
        for (const Frame& f : s) {
            key.append(reinterpret_cast<const char*>(&f.first), sizeof f.first);
            key.append(reinterpret_cast<const char*>(&f.second), sizeof f.second);
        }
        key += ';';
    }
    return key;
}

std::string Matcher::position_key() const { return state_key(stacks_, accepting_, partial_); }

void Matcher::fill_mask(const TokenTrie& trie, std::vector<uint8_t>& mask, MaskCache* cache) const {
    std::string key;
    if (cache != nullptr) {
        key = position_key();
        if (cache->find(key, mask)) return;
    }
    mask.assign(trie.vocab_size(), 0);
    WalkStates ws;
    walk(trie, 0, ws.intern(State{stacks_, accepting_, partial_}), ws, mask);
    if (cache != nullptr) cache->put(key, mask);
}

bool MaskCache::find(const std::string& key, std::vector<uint8_t>& mask) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = masks_.find(key);
    if (it == masks_.end()) return false;
    const Entry& e = it->second;
    mask.resize(e.size);
    for (size_t t = 0; t < e.size; ++t) mask[t] = uint8_t((e.bits[t >> 6] >> (t & 63)) & 1);
    ++hits_;
    return true;
}

void MaskCache::put(const std::string& key, const std::vector<uint8_t>& mask) {
    Entry e;
    e.size = mask.size();
    e.bits.assign((mask.size() + 63) / 64, 0);
    for (size_t t = 0; t < mask.size(); ++t) {
        if (mask[t]) e.bits[t >> 6] |= uint64_t(1) << (t & 63);
    }
    const size_t cost = e.bits.size() * sizeof(uint64_t) + key.size();
    std::lock_guard<std::mutex> lock(mu_);
    if (capacity_ == 0 || cost > max_bytes_ || masks_.count(key)) return;
    while (!order_.empty() && (masks_.size() >= capacity_ || bytes_ + cost > max_bytes_)) {
        auto old = masks_.find(order_.front());
        bytes_ -= old->second.bits.size() * sizeof(uint64_t) + old->first.size();
        masks_.erase(old);
        order_.pop_front();
    }
    masks_.emplace(key, std::move(e));
    order_.push_back(key);
    bytes_ += cost;
}

size_t MaskCache::size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return masks_.size();
}

size_t MaskCache::bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_;
}

uint64_t MaskCache::hits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return hits_;
}

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes)
    : vocab_size_(token_bytes.size()) {
    nodes_.emplace_back();
    for (size_t t = 0; t < token_bytes.size(); ++t) {
        if (token_bytes[t].empty()) continue;  // control tokens: never text
        int32_t n = 0;
        for (char c : token_bytes[t]) {
            const auto b = static_cast<uint8_t>(c);
            auto& next = nodes_[size_t(n)].next;
            auto it =
                std::find_if(next.begin(), next.end(), [&](const auto& p) { return p.first == b; });
            if (it != next.end()) {
                n = it->second;
            } else {
                nodes_.emplace_back();
                nodes_[size_t(n)].next.emplace_back(b, int32_t(nodes_.size() - 1));
                n = int32_t(nodes_.size() - 1);
            }
        }
        nodes_[size_t(n)].tokens.push_back(int32_t(t));
    }
}

}  // namespace pagoda::grammar
