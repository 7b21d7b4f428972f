// The GBNF-style grammar language: rules `name ::= alternatives`, where an alternative is a
// sequence of string literals, character classes ([a-z0-9_], [^"\\]), `.` (any character),
// rule names and groups, each optionally repeated (`*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`).
// Repetitions become helper rules (x* is R ::= x R | ""), then the grammar is checked:
// every referenced rule exists, the root exists, and no rule is left-recursive.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <optional>

#include "grammar/grammar.h"

namespace pagoda::grammar {

bool Element::matches(uint32_t cp) const {
    bool in = false;
    for (const auto& [lo, hi] : ranges) in = in || (cp >= lo && cp <= hi);
    return in != negated;
}

bool Element::intersects(uint32_t lo, uint32_t hi) const {
    if (!negated) {
        for (const auto& [a, b] : ranges) {
            if (a <= hi && b >= lo) return true;
        }
        return false;
    }
    // Some code point of [lo, hi] outside every range.
    uint32_t cp = lo;
    for (bool moved = true; moved && cp <= hi;) {
        moved = false;
        for (const auto& [a, b] : ranges) {
            if (cp >= a && cp <= b) {
                if (b >= hi) return false;
                cp = b + 1;
                moved = true;
            }
        }
    }
    return cp <= hi;
}

namespace {

struct ParseError {
    std::string message;
};

// Rules that can match the empty string (a fixpoint).
std::vector<bool> nullable_rules(const Grammar& g) {
    std::vector<bool> nullable(g.rules.size(), false);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < g.rules.size(); ++r) {
            if (nullable[r]) continue;
            for (const auto& alt : g.rules[r].alts) {
                bool all = true;
                for (const auto& e : alt)
                    all = all && e.kind == Element::kRule && nullable[size_t(e.rule)];
                if (all) {
                    nullable[r] = changed = true;
                    break;
                }
            }
        }
    }
    return nullable;
}

class GbnfParser {
  public:
    explicit GbnfParser(std::string_view s) : s_(s) {}
    Grammar parse(std::string_view root);

  private:
    [[noreturn]] void fail(const std::string& what) const {
        int line = 1;
        for (size_t i = 0; i < p_ && i < s_.size(); ++i) line += s_[i] == '\n';
        throw ParseError{fmt::format("grammar line {}: {}", line, what)};
    }
    void skip_space() {
        while (p_ < s_.size()) {
            if (s_[p_] == '#') {
                while (p_ < s_.size() && s_[p_] != '\n') ++p_;
            } else if (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\n' || s_[p_] == '\r') {
                ++p_;
            } else {
                break;
            }
        }
    }
    static bool name_char(char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_';
    }
    bool at_rule_start() {  // name ::=
        size_t q = p_;
        while (q < s_.size() && name_char(s_[q])) ++q;
        if (q == p_) return false;
        while (q < s_.size() && (s_[q] == ' ' || s_[q] == '\t')) ++q;
        return s_.substr(q, 3) == "::=";
    }
    std::string name() {
        const size_t b = p_;
        while (p_ < s_.size() && name_char(s_[p_])) ++p_;
        if (p_ == b) fail("expected a rule name");
        return std::string(s_.substr(b, p_ - b));
    }
    int rule_index(const std::string& n) {
        auto it = index_.find(n);
        if (it != index_.end()) return it->second;
        g_.rules.push_back({n, {}});
        index_[n] = int(g_.rules.size()) - 1;
        return int(g_.rules.size()) - 1;
    }
    int helper_rule(std::vector<Alternative> alts) {
        g_.rules.push_back({fmt::format("_{}", g_.rules.size()), std::move(alts)});
        return int(g_.rules.size()) - 1;
    }
    uint32_t char_at();  // one (possibly escaped) character of a literal or class
    std::vector<Alternative> alternatives(int depth);
    void sequence(Alternative& out, int depth);
    Element primary(Alternative& out, int depth, bool& appended);
    void repeat(Alternative& out, size_t first, Element e);

    std::string_view s_;
    size_t p_ = 0;
    Grammar g_;
    std::map<std::string, int> index_;
    std::vector<std::pair<int, int>> repeated_;  // (rule, line) repeated more than once
    std::vector<bool> defined_;
};

uint32_t GbnfParser::char_at() {
    if (p_ >= s_.size()) fail("unexpected end of grammar");
    const auto c = static_cast<unsigned char>(s_[p_]);
    if (c == '\\') {
        if (++p_ >= s_.size()) fail("unfinished escape");
        const char e = s_[p_++];
        switch (e) {
            case 'n': return '\n';
            case 't': return '\t';
            case 'r': return '\r';
            case 'x':
            case 'u':
            case 'U': {
                const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                const std::string_view hex = s_.substr(p_, n);
                if (hex.size() != n ||
                    hex.find_first_not_of("0123456789abcdefABCDEF") != std::string_view::npos) {
                    fail(fmt::format("\\{} needs {} hex digits", e, n));
                }
                p_ += n;
                return uint32_t(std::stoul(std::string(hex), nullptr, 16));
            }
            default: return static_cast<unsigned char>(e);  // \\ \" \] \[ \- and the like
        }
    }
    // A UTF-8 character.
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || p_ + n > s_.size()) fail("invalid UTF-8 in the grammar");
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s_[p_ + k]) & 0x3F);
    p_ += n;
    return cp;
}

std::vector<Alternative> GbnfParser::alternatives(int depth) {
    if (depth > 100) fail("groups nested too deeply");
    std::vector<Alternative> alts(1);
    sequence(alts.back(), depth);
    for (skip_space(); p_ < s_.size() && s_[p_] == '|'; skip_space()) {
        ++p_;
        alts.emplace_back();
        sequence(alts.back(), depth);
    }
    return alts;
}

void GbnfParser::sequence(Alternative& out, int depth) {
    for (;;) {
        skip_space();
        if (p_ >= s_.size() || s_[p_] == '|' || s_[p_] == ')' || at_rule_start()) return;
        const size_t first = out.size();
        bool appended = false;
        Element e = primary(out, depth, appended);
        skip_space();
        if (p_ < s_.size() && (s_[p_] == '*' || s_[p_] == '+' || s_[p_] == '?' || s_[p_] == '{')) {
            if (appended) {  // a literal of several characters: repeat it as one group
                Alternative lit(out.begin() + long(first), out.end());
                out.resize(first);
                e = Element{Element::kRule, {}, false, helper_rule({lit})};
            }
            repeat(out, first, e);
        } else if (!appended) {
            out.push_back(e);
        }
    }
}

// A primary: literals append their characters to `out` (appended = true); everything else
// is returned as one element.
Element GbnfParser::primary(Alternative& out, int depth, bool& appended) {
    const char c = s_[p_];
    if (c == '"') {
        ++p_;
        while (p_ < s_.size() && s_[p_] != '"') {
            const uint32_t cp = char_at();
            out.push_back(Element{Element::kChars, {{cp, cp}}, false, -1});
        }
        if (p_ >= s_.size()) fail("unterminated string literal");
        ++p_;
        appended = true;
        return {};
    }
    if (c == '[') {
        ++p_;
        Element e;
        if (p_ < s_.size() && s_[p_] == '^') {
            e.negated = true;
            ++p_;
        }
        while (p_ < s_.size() && s_[p_] != ']') {
            const uint32_t lo = char_at();
            uint32_t hi = lo;
            if (p_ + 1 < s_.size() && s_[p_] == '-' && s_[p_ + 1] != ']') {
                ++p_;
                hi = char_at();
                if (hi < lo) fail("a character range runs backwards");
            }
            e.ranges.emplace_back(lo, hi);
        }
        if (p_ >= s_.size()) fail("unterminated character class");
        ++p_;
        return e;
    }
    if (c == '.') {
        ++p_;
        return Element{Element::kChars, {{0, 0x10FFFF}}, false, -1};
    }
    if (c == '(') {
        ++p_;
        auto alts = alternatives(depth + 1);
        skip_space();
        if (p_ >= s_.size() || s_[p_] != ')') fail("expected ')'");
        ++p_;
        return Element{Element::kRule, {}, false, helper_rule(std::move(alts))};
    }
    if (name_char(c)) return Element{Element::kRule, {}, false, rule_index(name())};
    fail(fmt::format("unexpected '{}'", c));
}

void GbnfParser::repeat(Alternative& out, size_t first, Element e) {
    (void)first;
    const char op = s_[p_++];
    size_t lo = 0, hi = SIZE_MAX;
    if (op == '+') lo = 1;
    if (op == '?') hi = 1;
    if (op == '{') {
        auto number = [&] {
            skip_space();
            const size_t b = p_;
            while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
            if (b == p_) fail("expected a number in {m,n}");
            return size_t(std::stoul(std::string(s_.substr(b, p_ - b))));
        };
        lo = hi = number();
        skip_space();
        if (p_ < s_.size() && s_[p_] == ',') {
            ++p_;
            skip_space();
            hi = p_ < s_.size() && s_[p_] == '}' ? SIZE_MAX : number();
        }
        skip_space();
        if (p_ >= s_.size() || s_[p_] != '}') fail("expected '}'");
        ++p_;
        if (hi < lo) fail("{m,n} needs m <= n");
        if (lo > 1000 || (hi != SIZE_MAX && hi > 1000)) fail("repetition counts above 1000");
    }
    if (e.kind == Element::kRule && hi > 1) {
        int line = 1;
        for (size_t i = 0; i < p_ && i < s_.size(); ++i) line += s_[i] == '\n';
        repeated_.emplace_back(e.rule, line);
    }
    for (size_t i = 0; i < lo; ++i) out.push_back(e);
    if (hi == SIZE_MAX) {  // R ::= e R | ""
        const int r = helper_rule({});
        g_.rules[size_t(r)].alts = {{e, Element{Element::kRule, {}, false, r}}, {}};
        out.push_back(Element{Element::kRule, {}, false, r});
        return;
    }
    // Up to hi - lo more, nested: O ::= e O' | "" so each count has one parse.
    int next = -1;
    for (size_t i = lo; i < hi; ++i) {
        Alternative more{e};
        if (next >= 0) more.push_back(Element{Element::kRule, {}, false, next});
        next = helper_rule({more, {}});
    }
    if (next >= 0) out.push_back(Element{Element::kRule, {}, false, next});
}

Grammar GbnfParser::parse(std::string_view root) {
    std::vector<bool> defined;
    for (skip_space(); p_ < s_.size(); skip_space()) {
        const std::string n = name();
        skip_space();
        if (s_.substr(p_, 3) != "::=") fail(fmt::format("expected '::=' after '{}'", n));
        p_ += 3;
        const int r = rule_index(n);
        if (defined.size() <= size_t(r)) defined.resize(size_t(r) + 1, false);
        if (defined[size_t(r)]) fail(fmt::format("rule '{}' is defined twice", n));
        defined[size_t(r)] = true;
        g_.rules[size_t(r)].alts = alternatives(0);
    }
    for (const auto& [n, r] : index_) {
        if (size_t(r) >= defined.size() || !defined[size_t(r)]) {
            fail(fmt::format("rule '{}' is used but not defined", n));
        }
    }
    auto it = index_.find(std::string(root));
    if (it == index_.end()) fail(fmt::format("no '{}' rule", root));
    g_.root = it->second;
    // A repetition of something that can be empty is ambiguous in as many ways as it has
    // copies ((x*){0,50}): the parse state would grow with every copy. Refused.
    const std::vector<bool> nullable = nullable_rules(g_);
    for (const auto& [rule, line] : repeated_) {
        if (nullable[size_t(rule)]) {
            throw ParseError{
                fmt::format("grammar line {}: a repetition of something that can "
                            "match the empty string (not supported; make the "
                            "repeated part non-empty)",
                            line)};
        }
    }
    return std::move(g_);
}

// Rules that can match nothing, then left recursion (a rule reaching itself before any
// character, through such rules): refused, as it would never stop expanding.
std::optional<std::string> left_recursion(const Grammar& g) {
    const std::vector<bool> nullable = nullable_rules(g);
    std::vector<int> color(g.rules.size(), 0);  // 0 new, 1 on the path, 2 done
    std::function<int(int)> visit = [&](int r) -> int {
        color[size_t(r)] = 1;
        for (const auto& alt : g.rules[size_t(r)].alts) {
            for (const auto& e : alt) {
                if (e.kind != Element::kRule) break;
                if (color[size_t(e.rule)] == 1) return e.rule;
                if (color[size_t(e.rule)] == 0) {
                    if (int bad = visit(e.rule); bad >= 0) return bad;
                }
                if (!nullable[size_t(e.rule)]) break;
            }
        }
        color[size_t(r)] = 2;
        return -1;
    };
    for (size_t r = 0; r < g.rules.size(); ++r) {
        if (color[r] != 0) continue;
        if (int bad = visit(int(r)); bad >= 0) {
            const std::string& n = g.rules[size_t(bad)].name;
            return n[0] == '_' ? std::string(
                                     "a repetition of something that can be empty, or a "
                                     "left-recursive group")
                               : fmt::format("rule '{}' is left-recursive", n);
        }
    }
    return std::nullopt;
}

}  // namespace

Result<std::shared_ptr<const Grammar>> parse_gbnf(std::string_view text, std::string_view root) {
    try {
        Grammar g = GbnfParser(text).parse(root);
        if (auto bad = left_recursion(g)) {
            return make_error(ErrorCode::kInvalidArgument, "grammar: {} (not supported)", *bad);
        }
        return std::make_shared<const Grammar>(std::move(g));
    } catch (const ParseError& e) {
        return make_error(ErrorCode::kInvalidArgument, "{}", e.message);
    }
}

bool accepts_something(const Grammar& g) {
    // Productive rules, to a fixpoint: some alternative whose every element is a character
    // class that matches something or a productive rule.
    std::vector<uint8_t> productive(g.rules.size(), 0);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < g.rules.size(); ++r) {
            if (productive[r]) continue;
            for (const Alternative& alt : g.rules[r].alts) {
                const bool all = std::all_of(alt.begin(), alt.end(), [&](const Element& e) {
                    return e.kind == Element::kChars ? e.intersects(0, 0x10FFFF)
                                                     : productive[size_t(e.rule)] != 0;
                });
                if (all) {
                    productive[r] = 1;
                    changed = true;
                    break;
                }
            }
        }
    }
    return productive[size_t(g.root)] != 0;
}

}  // namespace pagoda::grammar
