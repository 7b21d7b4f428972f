#pragma once
// IncrementalDetokenizer: turns a stream of token ids into text deltas that are always
// valid UTF-8. Holds back an incomplete character until the bytes that complete it
// arrive; bytes that can never become valid UTF-8 become U+FFFD at once, so a stream
// never stalls. One instance per output stream; not thread-safe.

#include <string>

#include "tokenizer/tokenizer.h"

namespace pagoda::tokenizer {

class IncrementalDetokenizer {
  public:
    // kStart: the next token starts the text (SentencePiece prefix space is dropped);
    // kContinuation: the tokens continue a prompt.
    enum class Position { kStart, kContinuation };
    IncrementalDetokenizer(const Tokenizer& tok, Position position);

    // Appends one token; returns the text that is now safe to emit (may be empty).
    std::string push(TokenId id);
    // End of stream: whatever is still held back, incomplete bytes as U+FFFD.
    std::string flush();
    size_t pending_bytes() const { return pending_.size(); }

  private:
    std::string drain(bool final);
    const Tokenizer& tok_;
    bool strip_space_;
    std::string pending_;
};

// Appends `bytes` as valid UTF-8: complete characters copied, invalid bytes as U+FFFD.
std::string sanitize_utf8(std::string_view bytes);

}  // namespace pagoda::tokenizer
