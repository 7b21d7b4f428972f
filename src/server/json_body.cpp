// The implementation of server/json_body.h (the contract is there).
#include "server/json_body.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>

#include "tokenizer/unicode.h"

namespace pagoda::server {

namespace {

using json = nlohmann::json;

constexpr int kMaxDepth = 256;

class Parser {
  public:
    explicit Parser(std::string_view s) : p_(s.data()), end_(s.data() + s.size()) {}

    // The whole text as one value (white space around it allowed); false: not decided.
    bool document(json& out) {
        space();
        if (!value(out, 0)) return false;
        space();
        return p_ == end_;
    }

  private:
    const char* p_;
    const char* end_;

    void space() {
        while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
    }
    bool eat(char c) {
        if (p_ == end_ || *p_ != c) return false;
        ++p_;
        return true;
    }
    bool word(std::string_view w) {
        if (size_t(end_ - p_) < w.size() || std::string_view(p_, w.size()) != w) return false;
        p_ += w.size();
        return true;
    }

    bool value(json& out, int depth) {
        if (p_ == end_) return false;
        switch (*p_) {
            case '{': return object(out, depth + 1);
            case '[': return array(out, depth + 1);
            case '"': {
                std::string s;
                if (!string(s)) return false;
                out = std::move(s);
                return true;
            }
            case 't': out = true; return word("true");
            case 'f': out = false; return word("false");
            case 'n': out = nullptr; return word("null");
            default: return number(out);
        }
    }

    // From an opening bracket: `item` for each element up to `close`, commas between.
    template <typename Item>
    bool elements(char close, Item item) {
        ++p_;
        space();
        if (eat(close)) return true;
        for (;;) {
            if (!item()) return false;
            space();
            if (eat(close)) return true;
            if (!eat(',')) return false;
            space();
        }
    }

    bool object(json& out, int depth) {
        if (depth > kMaxDepth) return false;
        out = json::object();
        return elements('}', [&] {
            std::string key;
            if (p_ == end_ || *p_ != '"' || !string(key)) return false;
            space();
            if (!eat(':')) return false;
            space();
            json v;
            if (!value(v, depth)) return false;
            out[key] = std::move(v);  // a repeated key: the last one (as nlohmann)
            return true;
        });
    }

    bool array(json& out, int depth) {
        if (depth > kMaxDepth) return false;
        out = json::array();
        return elements(']', [&] {
            json v;
            if (!value(v, depth)) return false;
            out.push_back(std::move(v));
            return true;
        });
    }

    // A string from its opening quote: plain runs copied at once, escapes decoded, UTF-8
    // checked byte by byte as RFC 3629 (and nlohmann) allow it.
    bool string(std::string& out) {
        ++p_;  // '"'
        for (;;) {
            const char* run = p_;
            while (p_ < end_ && static_cast<unsigned char>(*p_) >= 0x20 &&
                   static_cast<unsigned char>(*p_) < 0x80 && *p_ != '"' && *p_ != '\\') {
                ++p_;
            }
            out.append(run, p_);
            if (p_ == end_) return false;
            const auto c = static_cast<unsigned char>(*p_);
            if (c == '"') {
                ++p_;
                return true;
            }
            if (c == '\\') {
                if (!escape(out)) return false;
            } else if (c < 0x20) {
                return false;  // a control character must be escaped
            } else if (!utf8(out)) {
                return false;
            }
        }
    }

    // One multi-byte UTF-8 character, checked and appended.
    bool utf8(std::string& out) {
        const auto b0 = static_cast<unsigned char>(*p_);
        int n = 0;
        unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
        if (b0 >= 0xC2 && b0 <= 0xDF) {
            n = 1;
        } else if (b0 >= 0xE0 && b0 <= 0xEF) {
            n = 2;
            if (b0 == 0xE0) lo = 0xA0;
            if (b0 == 0xED) hi = 0x9F;
        } else if (b0 >= 0xF0 && b0 <= 0xF4) {
            n = 3;
            if (b0 == 0xF0) lo = 0x90;
            if (b0 == 0xF4) hi = 0x8F;
        } else {
            return false;
        }
        if (end_ - p_ <= n) return false;
        for (int i = 1; i <= n; ++i) {
            const auto b = static_cast<unsigned char>(p_[i]);
            if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF)) return false;
        }
        out.append(p_, size_t(n + 1));
        p_ += n + 1;
        return true;
    }

    bool hex4(uint32_t& v) {
        if (end_ - p_ < 4) return false;
        v = 0;
        for (int i = 0; i < 4; ++i) {
            const char c = *p_++;
            v <<= 4;
            if (c >= '0' && c <= '9') {
                v |= uint32_t(c - '0');
            } else if (c >= 'a' && c <= 'f') {
                v |= uint32_t(c - 'a' + 10);
            } else if (c >= 'A' && c <= 'F') {
                v |= uint32_t(c - 'A' + 10);
            } else {
                return false;
            }
        }
        return true;
    }

    bool escape(std::string& out) {
        ++p_;  // '\\'
        if (p_ == end_) return false;
        const char c = *p_++;
        switch (c) {
            case '"': out += '"'; return true;
            case '\\': out += '\\'; return true;
            case '/': out += '/'; return true;
            case 'b': out += '\b'; return true;
            case 'f': out += '\f'; return true;
            case 'n': out += '\n'; return true;
            case 'r': out += '\r'; return true;
            case 't': out += '\t'; return true;
            case 'u': break;
            default: return false;
        }
        uint32_t cp = 0;
        if (!hex4(cp)) return false;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return false;  // a low surrogate alone
        if (cp >= 0xD800 && cp <= 0xDBFF) {              // a pair's high half
            uint32_t low = 0;
            if (!word("\\u") || !hex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        tokenizer::append_utf8(out, cp);
        return true;
    }

    static bool digit(char c) { return c >= '0' && c <= '9'; }

    // JSON's number grammar; integers as nlohmann keeps them (unsigned unless negative),
    // fractions and exponents as the nearest double. Integers past 64 bits: not decided.
    bool number(json& out) {
        const char* start = p_;
        const bool negative = eat('-');
        if (p_ == end_ || !digit(*p_)) return false;
        if (*p_ == '0') {
            ++p_;
        } else {
            while (p_ < end_ && digit(*p_)) ++p_;
        }
        bool integer = true;
        if (p_ < end_ && *p_ == '.') {
            integer = false;
            ++p_;
            if (p_ == end_ || !digit(*p_)) return false;
            while (p_ < end_ && digit(*p_)) ++p_;
        }
        if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
            integer = false;
            ++p_;
            if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
            if (p_ == end_ || !digit(*p_)) return false;
            while (p_ < end_ && digit(*p_)) ++p_;
        }
        if (integer && negative) {
            int64_t v = 0;
            const auto r = std::from_chars(start, p_, v);
            if (r.ec != std::errc() || r.ptr != p_) return false;
            out = v;
            return true;
        }
        if (integer) {
            uint64_t v = 0;
            const auto r = std::from_chars(start, p_, v);
            if (r.ec != std::errc() || r.ptr != p_) return false;
            out = v;
            return true;
        }
        double d = 0;
        const auto r = std::from_chars(start, p_, d);
        if (r.ec != std::errc() || r.ptr != p_ || !std::isfinite(d)) return false;
        out = d;
        return true;
    }
};

}  // namespace

std::optional<json> parse_json_fast(std::string_view text) {
    json out;
    Parser parser(text);
    if (!parser.document(out)) return std::nullopt;
    return out;
}

}  // namespace pagoda::server
