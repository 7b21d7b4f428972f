// The implementation of tokenizer/unicode.h (the contract is there).
#include "tokenizer/unicode.h"

#include <array>
#include <unordered_map>

namespace pagoda::tokenizer {

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xc0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += char(0xe0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3f));
        out += char(0x80 | (cp & 0x3f));
    } else {
        out += char(0xf0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3f));
        out += char(0x80 | ((cp >> 6) & 0x3f));
        out += char(0x80 | (cp & 0x3f));
    }
}

Utf8Check check_utf8(std::string_view s) {
    const auto b0 = uint8_t(s[0]);
    if (b0 < 0x80) return {Utf8Status::kComplete, 1};
    size_t need;
    uint8_t lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (b0 >= 0xc2 && b0 <= 0xdf) {
        need = 2;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
        need = 3;
        if (b0 == 0xe0) lo = 0xa0;  // no overlongs
        if (b0 == 0xed) hi = 0x9f;  // no surrogates
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
        need = 4;
        if (b0 == 0xf0) lo = 0x90;
        if (b0 == 0xf4) hi = 0x8f;  // <= U+10FFFF
    } else {
        return {Utf8Status::kInvalid, 1};
    }
    for (size_t k = 1; k < need; ++k) {
        if (k >= s.size()) return {Utf8Status::kIncomplete, k};
        const auto b = uint8_t(s[k]);
        const uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xbf;
        if (b < l || b > h) return {Utf8Status::kInvalid, k};
    }
    return {Utf8Status::kComplete, need};
}

bool is_valid_utf8(std::string_view s) {
    while (!s.empty()) {
        const Utf8Check c = check_utf8(s);
        if (c.status != Utf8Status::kComplete) return false;
        s.remove_prefix(c.len);
    }
    return true;
}

namespace {

struct ByteTable {
    std::array<uint32_t, 256> byte_to_cp{};
    std::unordered_map<uint32_t, uint8_t> cp_to_byte;
    ByteTable() {
        uint32_t next = 256;
        for (uint32_t b = 0; b < 256; ++b) {
            const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
            byte_to_cp[b] = printable ? b : next++;
            cp_to_byte[byte_to_cp[b]] = uint8_t(b);
        }
    }
};

const ByteTable& table() {
    static const ByteTable t;
    return t;
}

}  // namespace

std::string bytes_to_bpe_chars(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes) append_utf8(out, table().byte_to_cp[uint8_t(c)]);
    return out;
}

bool bpe_chars_to_bytes(std::string_view text, std::string& out) {
    size_t i = 0;
    while (i < text.size()) {
        const auto b0 = uint8_t(text[i]);
        const size_t n = utf8_lead_len(b0);
        if (i + n > text.size()) return false;
        uint32_t cp = n == 1 ? b0 : (b0 & (0xff >> (n + 1)));
        for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (uint8_t(text[i + k]) & 0x3f);
        auto it = table().cp_to_byte.find(cp);
        if (it == table().cp_to_byte.end()) return false;
        out += char(it->second);
        i += n;
    }
    return true;
}

}  // namespace pagoda::tokenizer
