// The Jinja lexer: template text to tokens, with line and column for errors (jinja_internal.h).
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "template/jinja_internal.h"
#include "tokenizer/unicode.h"

namespace pagoda::jinja {

namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// An integer or decimal literal starting at s[i]; advances i.
Tok lex_number(const std::string& s, size_t& i, int line) {
    size_t j = i;
    bool real = false;
    auto digits = [&] {  // digits with single underscores between them (1_000)
        while (j < s.size() &&
               (is_digit(s[j]) || (s[j] == '_' && j + 1 < s.size() && is_digit(s[j + 1]))))
            ++j;
    };
    digits();
    if (j + 1 < s.size() && s[j] == '.' && is_digit(s[j + 1])) {
        real = true;
        ++j;
        digits();
    }
    if (j + 1 < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && is_digit(s[k])) {
            real = true;
            j = k;
            digits();
        }
    }
    std::string t;
    for (size_t k = i; k < j; ++k) {
        if (s[k] != '_') t += s[k];
    }
    errno = 0;
    char* end = nullptr;
    const json v = real ? json(std::strtod(t.c_str(), &end))
                        : json(int64_t(std::strtoll(t.c_str(), &end, 10)));
    if (errno == ERANGE) fail(line, fmt::format("number {} is out of range", t));
    i = j;
    return {Tok::kNum, t, v};
}

// One escape after a backslash at s[j] (Python's unicode-escape, as Jinja decodes string
// literals: unknown escapes keep their backslash); advances j to the escape's last char.
void lex_escape(const std::string& s, size_t& j, std::string& v, int line) {
    const char e = s[j];
    static const std::string simple = "ntr\\'\"abfv0";
    static const char* values = "\n\t\r\\'\"\a\b\f\v";
    const size_t k = simple.find(e);
    if (e == '0') {
        v += '\0';
    } else if (k != std::string::npos) {
        v += values[k];
    } else if (e == 'x' || e == 'u' || e == 'U') {
        const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        const std::string hex = s.substr(j + 1, n);
        if (hex.size() != n || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            fail(line, fmt::format("bad escape \\{}{}", e, hex));
        const auto cp = uint32_t(std::stoul(hex, nullptr, 16));
        if (cp > 0x10FFFF) fail(line, fmt::format("escape \\{}{} is out of range", e, hex));
        tokenizer::append_utf8(v, cp);
        j += n;
    } else {
        v += '\\';
        v += e;
    }
}

// A quoted string literal starting at s[i] (its quote); advances i past the closing quote.
Tok lex_string(const std::string& s, size_t& i, int line) {
    const char quote = s[i];
    std::string v;
    size_t j = i + 1;
    while (j < s.size() && s[j] != quote) {
        if (s[j] == '\\' && j + 1 < s.size()) {
            ++j;
            lex_escape(s, j, v, line);
        } else {
            v += s[j];
        }
        ++j;
    }
    if (j >= s.size()) fail(line, "unterminated string");
    i = j + 1;
    return {Tok::kStr, v, {}};
}

// An operator at s[i], longest first; advances i.
Tok lex_op(const std::string& s, size_t& i, int line) {
    static const char* ops[] = {"==", "!=", "<=", ">=", "//", "**", "(", ")", "[",
                                "]",  "{",  "}",  ",",  ":",  ".",  "|", "~", "+",
                                "-",  "*",  "/",  "%",  "<",  ">",  "="};
    for (const char* op : ops) {
        const size_t n = std::char_traits<char>::length(op);
        if (s.compare(i, n, op) == 0) {
            i += n;
            return {Tok::kOp, op, {}};
        }
    }
    fail(line, fmt::format("unexpected character '{}'", s[i]));
}

}  // namespace

std::vector<Tok> lex_expr(const std::string& s, int line) {
    std::vector<Tok> out;
    size_t i = 0;
    while (i < s.size()) {
        const char c = s[i];
        if (is_space(c)) {
            ++i;
        } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            size_t j = i;
            while (j < s.size() && is_word(s[j])) ++j;
            out.push_back({Tok::kName, s.substr(i, j - i), {}});
            i = j;
        } else if (is_digit(c)) {
            out.push_back(lex_number(s, i, line));
        } else if (c == '\'' || c == '"') {
            out.push_back(lex_string(s, i, line));
        } else {
            out.push_back(lex_op(s, i, line));
        }
    }
    out.push_back({Tok::kEnd, "", {}});
    return out;
}

namespace {

// Whitespace control on the text before a tag: '{%-' strips all trailing whitespace;
// lstrip_blocks strips spaces and tabs before a block tag that starts its line.
void trim_before_tag(std::string& text, char kind, bool minus_open, bool plus_open,
                     bool began_line) {
    if (minus_open) {
        size_t e = text.size();
        while (e > 0 && is_space(text[e - 1])) --e;
        text.resize(e);
        return;
    }
    if (kind == '{' || plus_open) return;
    const size_t nl = text.rfind('\n');
    const size_t from = nl == std::string::npos ? 0 : nl + 1;
    bool only_ws = true;
    for (size_t k = from; k < text.size(); ++k)
        only_ws = only_ws && (text[k] == ' ' || text[k] == '\t');
    const bool line_start = nl != std::string::npos || began_line;
    if (only_ws && line_start) text.resize(from);
}

// After a tag: '-%}' strips all leading whitespace of the next text; trim_blocks one newline.
enum class TrimNext { kNone, kWhitespace, kNewline };

void trim_after_tag(std::string& text, TrimNext how) {
    if (how == TrimNext::kWhitespace) {
        size_t p = 0;
        while (p < text.size() && is_space(text[p])) ++p;
        text = text.substr(p);
    } else if (how == TrimNext::kNewline && !text.empty() && text[0] == '\n') {
        text = text.substr(1);
    }
}

// The end of a tag: the first `close` after `from` that is not inside a quoted string
// ({{ '}}' }} is an expression printing "}}"). Comments have no strings.
size_t find_close(const std::string& src, size_t from, const char* close, bool strings) {
    for (size_t i = from; i + 1 < src.size(); ++i) {
        const char c = src[i];
        if (strings && (c == '\'' || c == '"')) {
            for (++i; i < src.size() && src[i] != c; ++i) {
                if (src[i] == '\\') ++i;
            }
            if (i >= src.size()) return std::string::npos;
            continue;
        }
        if (c == close[0] && src[i + 1] == close[1]) return i;
    }
    return std::string::npos;
}

}  // namespace

std::vector<Piece> split_template(const std::string& src) {
    std::vector<Piece> out;
    size_t i = 0;
    int line = 1;
    TrimNext trim = TrimNext::kNone;
    auto count_lines = [&](size_t a, size_t b) {
        for (size_t k = a; k < b && k < src.size(); ++k) line += src[k] == '\n';
    };
    while (i < src.size()) {
        size_t open = std::string::npos;
        for (const char* o : {"{{", "{%", "{#"}) open = std::min(open, src.find(o, i));
        std::string text = src.substr(i, open == std::string::npos ? std::string::npos : open - i);
        const bool began_line = i == 0 || src[i - 1] == '\n' || (!text.empty() && text[0] == '\n');
        trim_after_tag(text, trim);
        trim = TrimNext::kNone;
        if (open == std::string::npos) {
            if (!text.empty()) out.push_back({Piece::kText, text, line});
            break;
        }
        const char kind = src[open + 1];
        const bool minus_open = open + 2 < src.size() && src[open + 2] == '-';
        const bool plus_open = open + 2 < src.size() && src[open + 2] == '+';
        trim_before_tag(text, kind, minus_open, plus_open, began_line);
        if (!text.empty()) out.push_back({Piece::kText, text, line});
        count_lines(i, open);
        const char* close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
        const size_t end = find_close(src, open + 2, close, kind != '#');
        if (end == std::string::npos) fail(line, fmt::format("'{}{}' is never closed", '{', kind));
        const size_t body_start = open + 2 + (minus_open || plus_open ? 1 : 0);
        size_t body_end = end;
        const bool minus_close = body_end > body_start && src[body_end - 1] == '-';
        const bool plus_close = body_end > body_start && src[body_end - 1] == '+';
        if (minus_close || plus_close) --body_end;
        const std::string body = src.substr(body_start, body_end - body_start);
        const size_t nl = src.rfind('\n', open);
        const int col = int(open - (nl == std::string::npos ? 0 : nl + 1)) + 1;
        if (kind == '{') out.push_back({Piece::kExpr, body, line, col});
        if (kind == '%') out.push_back({Piece::kStmt, body, line, col});
        count_lines(open, end + 2);
        i = end + 2;
        trim = minus_close                  ? TrimNext::kWhitespace
               : kind != '{' && !plus_close ? TrimNext::kNewline
                                            : TrimNext::kNone;
    }
    return out;
}

}  // namespace pagoda::jinja
