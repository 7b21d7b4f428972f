// Regular expressions (guided_regex) to GBNF: the pattern must match the whole output.
// Supported: literals, escapes (\d \w \s and their negations, \n \t \r \f \v, \xHH,
// \uHHHH, escaped punctuation), classes [a-z] [^...] with those escapes inside, '.' (any
// character but a newline), groups ( ), (?: ), (?<name> ), (?P<name> ), alternation, and
// * + ? {m} {m,} {m,n} (lazy forms are the same set of strings). ^ at the start and $ at
// the end are implied. Anything else (backreferences, lookaround, \b) is an error naming it.
#include <fmt/format.h>

#include "grammar/grammar.h"

namespace pagoda::grammar {

namespace {

struct RegexError {
    std::string message;
};

constexpr int kMaxRepeat = 1000;

std::vector<uint32_t> decode_utf8(std::string_view s) {
    std::vector<uint32_t> out;
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t n = c < 0x80         ? 1
                         : (c >> 5) == 6  ? 2
                         : (c >> 4) == 14 ? 3
                         : (c >> 3) == 30 ? 4
                                          : 0;
        if (n == 0 || i + n > s.size()) throw RegexError{"the pattern is not valid UTF-8"};
        uint32_t cp = n == 1 ? c : c & (0x7F >> n);
        for (size_t k = 1; k < n; ++k)
            cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
        out.push_back(cp);
        i += n;
    }
    return out;
}

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

std::string class_text(const Ranges& r, bool negated) {
    std::string out = negated ? "[^" : "[";
    for (const auto& [lo, hi] : r) {
        out += fmt::format("\\U{:08X}", lo);
        if (hi != lo) out += fmt::format("-\\U{:08X}", hi);
    }
    return out + "]";
}

class RegexConverter {
  public:
    explicit RegexConverter(std::string_view pattern) : p_(decode_utf8(pattern)) {}
    std::string convert() {
        if (at('^')) ++i_;
        std::string e = alternation(0);
        if (i_ < p_.size()) fail(p_[i_] == ')' ? "unbalanced ')'" : "unexpected character");
        return "root ::= " + e + "\n";
    }

  private:
    [[noreturn]] void fail(const std::string& what) const {
        throw RegexError{fmt::format("regex at character {}: {}", i_ + 1, what)};
    }
    bool at(uint32_t c) const { return i_ < p_.size() && p_[i_] == c; }
    std::string alternation(int depth) {
        if (depth > 64) fail("groups nested more than 64 levels");
        std::vector<std::string> alts{concat(depth)};
        bool nullable = nullable_;
        while (at('|')) {
            ++i_;
            alts.push_back(concat(depth));
            nullable = nullable || nullable_;
        }
        nullable_ = nullable;
        if (alts.size() == 1) return alts[0];
        std::string out = "(";
        for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : " ") + alts[k];
        return out + " )";
    }
    std::string concat(int depth) {
        std::string out;
        bool nullable = true;
        while (i_ < p_.size() && !at('|') && !at(')')) {
            if (at('$') && i_ + 1 == p_.size()) {
                ++i_;
                break;
            }
            std::string a = repeat(atom(depth));
            nullable = nullable && nullable_;
            out += out.empty() ? a : " " + a;
        }
        nullable_ = nullable;
        return out.empty() ? "\"\"" : out;
    }
    int number() {
        int v = 0;
        bool any = false;
        while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') {
            v = std::min(v * 10 + int(p_[i_] - '0'), 1 << 20);
            ++i_;
            any = true;
        }
        return any ? v : -1;
    }
    std::string repeat(std::string a) {
        for (;;) {
            std::string q;
            bool unbounded = false;
            int lo_count = 1;
            if (at('*') || at('+') || at('?')) {
                q = std::string(1, char(p_[i_++]));
                unbounded = q != "?";
                lo_count = q == "+" ? 1 : 0;
            } else if (at('{')) {
                ++i_;
                const int lo = number();
                int hi = lo;
                if (at(',')) {
                    ++i_;
                    hi = number();
                }
                if (lo < 0 || !at('}')) fail("a repetition is {m}, {m,} or {m,n}");
                ++i_;
                if (hi >= 0 && hi < lo)
                    fail(fmt::format("repetition {{{},{}}}: max below min", lo, hi));
                if (lo > kMaxRepeat || hi > kMaxRepeat)
                    fail(fmt::format("repetition counts above {} are not supported", kMaxRepeat));
                q = hi < 0 ? fmt::format("{{{},}}", lo) : fmt::format("{{{},{}}}", lo, hi);
                unbounded = hi < 0 || hi > 1;  // more than one copy
                lo_count = lo;
            } else {
                return a;
            }
            if (at('?')) ++i_;  // lazy: the same strings
            if (at('+')) fail("possessive quantifiers are not supported");
            if (unbounded && nullable_) {
                fail(
                    "an unbounded repetition of something that can match the empty string "
                    "((a*)*, (a|b?)+) is not supported; make the repeated part non-empty");
            }
            nullable_ = nullable_ || lo_count == 0;
            a = "( " + a + " )" + q;
        }
    }
    uint32_t escape_char(uint32_t e) {
        switch (e) {
            case 'n': return '\n';
            case 't': return '\t';
            case 'r': return '\r';
            case 'f': return '\f';
            case 'v': return '\v';
            case '0': return 0;
            case 'x':
            case 'u': {
                const size_t n = e == 'x' ? 2 : 4;
                uint32_t v = 0;
                for (size_t k = 0; k < n; ++k, ++i_) {
                    if (i_ >= p_.size() || !std::isxdigit(int(p_[i_] < 128 ? p_[i_] : 0)))
                        fail(fmt::format("\\{} needs {} hex digits", char(e), n));
                    v = v * 16 + uint32_t(std::stoi(std::string(1, char(p_[i_])), nullptr, 16));
                }
                return v;
            }
            default: break;
        }
        if ((e >= '1' && e <= '9') || e == 'k') fail("backreferences are not supported");
        if (e == 'b' || e == 'B' || e == 'A' || e == 'Z' || e == 'z' || e == 'G')
            fail(fmt::format("the anchor \\{} is not supported", char(e)));
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z'))
            fail(fmt::format("the escape \\{} is not supported", char(e)));
        return e;  // escaped punctuation
    }
    // \d \w \s (negated: \D \W \S): true with the ranges set.
    static bool shorthand(uint32_t e, Ranges& r, bool& negated) {
        negated = e == 'D' || e == 'W' || e == 'S';
        switch (e) {
            case 'd':
            case 'D': r = {{'0', '9'}}; return true;
            case 'w':
            case 'W': r = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; return true;
            case 's':
            case 'S': r = {{'\t', '\r'}, {' ', ' '}}; return true;
            default: return false;
        }
    }
    std::string char_class() {
        bool negated = false;
        if (at('^')) {
            negated = true;
            ++i_;
        }
        Ranges r;
        bool first = true;
        while (i_ < p_.size() && (!at(']') || first)) {
            first = false;
            uint32_t lo = p_[i_++];
            if (lo == '\\') {
                if (i_ >= p_.size()) fail("unfinished escape");
                const uint32_t e = p_[i_++];
                Ranges sh;
                bool neg = false;
                if (shorthand(e, sh, neg)) {
                    if (neg)
                        fail("negated shorthands (\\D \\W \\S) inside a class are not supported");
                    r.insert(r.end(), sh.begin(), sh.end());
                    continue;
                }
                lo = escape_char(e);
            }
            uint32_t hi = lo;
            if (at('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
                ++i_;
                hi = p_[i_++];
                if (hi == '\\') {
                    if (i_ >= p_.size()) fail("unfinished escape");
                    hi = escape_char(p_[i_++]);
                }
                if (hi < lo) fail("a class range goes backwards");
            }
            r.emplace_back(lo, hi);
        }
        if (!at(']')) fail("unterminated character class");
        ++i_;
        return class_text(r, negated);
    }
    std::string group(int depth) {
        if (at('?')) {
            ++i_;
            if (at(':')) {
                ++i_;
            } else if (at('P') ||
                       (at('<') && i_ + 1 < p_.size() && p_[i_ + 1] != '=' && p_[i_ + 1] != '!')) {
                if (at('P')) ++i_;
                while (i_ < p_.size() && !at('>')) ++i_;
                if (!at('>')) fail("unterminated group name");
                ++i_;
            } else {
                fail("lookaround and inline flags ((?=, (?!, (?<=, (?i) ...) are not supported");
            }
        }
        std::string e = alternation(depth + 1);
        if (!at(')')) fail("missing ')'");
        ++i_;
        return "( " + e + " )";
    }
    std::string atom(int depth) {
        nullable_ = false;  // a character; a group sets it from its alternation
        const uint32_t c = p_[i_++];
        switch (c) {
            case '(': return group(depth);
            case '[': return char_class();
            case '.': return class_text({{'\n', '\n'}}, true);
            case '*':
            case '+':
            case '?':
            case '{': --i_; fail("a quantifier with nothing to repeat");
            case '^': --i_; fail("'^' is only supported at the start");
            case '$': --i_; fail("'$' is only supported at the end");
            case '\\': {
                if (i_ >= p_.size()) fail("unfinished escape");
                const uint32_t e = p_[i_++];
                Ranges r;
                bool neg = false;
                if (shorthand(e, r, neg)) return class_text(r, neg);
                const uint32_t v = escape_char(e);
                return class_text({{v, v}}, false);
            }
            default: return class_text({{c, c}}, false);
        }
    }

    std::vector<uint32_t> p_;
    size_t i_ = 0;
    bool nullable_ = false;  // whether what was just converted can match the empty string
};

}  // namespace

std::string gbnf_literal(std::string_view text) {
    std::string out = "\"";
    for (unsigned char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += char(c);
        } else if (c < 0x20) {
            out += fmt::format("\\x{:02X}", c);
        } else {
            out += char(c);
        }
    }
    return out + "\"";
}

Result<std::string> regex_to_gbnf(std::string_view pattern) {
    try {
        return RegexConverter(pattern).convert();
    } catch (const RegexError& e) {
        return make_error(ErrorCode::kInvalidArgument, "{}", e.message);
    }
}

}  // namespace pagoda::grammar
