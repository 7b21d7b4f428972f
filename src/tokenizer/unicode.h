#pragma once
// UTF-8 helpers and GPT-2's byte<->unicode table for byte-level BPE.
// Pure functions; thread-safe.

#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda::tokenizer {

// Length of the UTF-8 sequence announced by lead byte `c` (1 for invalid lead bytes).
inline size_t utf8_lead_len(uint8_t c) {
    if (c < 0x80) return 1;
    if ((c & 0xe0) == 0xc0) return 2;
    if ((c & 0xf0) == 0xe0) return 3;
    if ((c & 0xf8) == 0xf0) return 4;
    return 1;
}

void append_utf8(std::string& out, uint32_t cp);

// Result of checking the bytes at the front of `s`.
enum class Utf8Status { kComplete, kIncomplete, kInvalid };
struct Utf8Check {
    Utf8Status status;
    size_t len;  // bytes of the complete char, or bytes to drop when invalid
};
// Checks one code point at the front of s (s non-empty): complete and valid, a valid
// prefix that more bytes may complete, or invalid (never valid, whatever follows).
Utf8Check check_utf8(std::string_view s);

bool is_valid_utf8(std::string_view s);

// GPT-2 byte-level encoding: every byte maps to one printable code point.
std::string bytes_to_bpe_chars(std::string_view bytes);
// Inverse; returns false if a code point is not in the table.
bool bpe_chars_to_bytes(std::string_view text, std::string& out);

}  // namespace pagoda::tokenizer
