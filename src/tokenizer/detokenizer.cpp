// IncrementalDetokenizer: the implementation (the contract is in tokenizer/detokenizer.h).
#include "tokenizer/detokenizer.h"

#include "tokenizer/unicode.h"

namespace pagoda::tokenizer {
namespace {
constexpr const char* kReplacement = "\xef\xbf\xbd";  // U+FFFD
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, Position position)
    : tok_(tok),
      strip_space_(position == Position::kStart && tok.vocab().kind == TokenizerKind::kSpm &&
                   tok.vocab().add_space_prefix) {}

std::string IncrementalDetokenizer::push(TokenId id) {
    std::string piece = tok_.token_bytes(id);
    if (piece.empty()) return {};
    if (strip_space_) {
        if (piece[0] == ' ') piece.erase(0, 1);
        strip_space_ = false;
    }
    pending_ += piece;
    return drain(false);
}

std::string IncrementalDetokenizer::flush() { return drain(true); }

std::string IncrementalDetokenizer::drain(bool final) {
    std::string out;
    size_t i = 0;
    while (i < pending_.size()) {
        const Utf8Check c = check_utf8(std::string_view(pending_).substr(i));
        if (c.status == Utf8Status::kComplete) {
            out.append(pending_, i, c.len);
            i += c.len;
        } else if (c.status == Utf8Status::kInvalid) {
            out += kReplacement;
            i += c.len;
        } else {  // incomplete: wait for more bytes unless the stream ended
            if (!final) break;
            out += kReplacement;
            i = pending_.size();
        }
    }
    pending_.erase(0, i);
    return out;
}

std::string sanitize_utf8(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    size_t i = 0;
    while (i < bytes.size()) {
        const Utf8Check c = check_utf8(bytes.substr(i));
        if (c.status == Utf8Status::kComplete) {
            out.append(bytes.substr(i, c.len));
            i += c.len;
        } else {
            out += kReplacement;
            i += c.status == Utf8Status::kInvalid ? c.len : bytes.size() - i;
        }
    }
    return out;
}

}  // namespace pagoda::tokenizer
