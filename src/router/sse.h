#pragma once
// SseSplitter: splits a text/event-stream body, fed in arbitrary pieces, into the data of
// its events (the "data:" lines of one event joined by '\n'). Comments and other fields are
// skipped; CRLF and LF line ends are both accepted. Fuzzed (fuzz/sse_fuzz.cpp).

#include <optional>
#include <string>
#include <string_view>

namespace pagoda::router {

class SseSplitter {
  public:
    void feed(std::string_view bytes) { buf_.append(bytes); }
    // The next complete event's data, if one is complete.
    std::optional<std::string> next();
    size_t buffered() const { return buf_.size() - pos_; }

  private:
    std::string buf_;
    size_t pos_ = 0;
};

}  // namespace pagoda::router
