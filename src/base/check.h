#pragma once
// PAGODA_CHECK: aborts on programmer errors with file, line and context.
// Never check what a user, a file or the network can make false: return an Error.
// Thread-safe (writes one line to stderr, then aborts).

#include <sstream>

namespace pagoda::detail {

class CheckFailure {
  public:
    CheckFailure(const char* file, int line, const char* cond);
    [[noreturn]] ~CheckFailure();
    template <typename T>
    CheckFailure& operator<<(const T& v) {
        os_ << v;
        return *this;
    }

  private:
    std::ostringstream os_;
};

// Lets `PAGODA_CHECK(x) << a << b;` compile as a void expression.
struct Voidify {
    void operator&(CheckFailure&) {}
};

}  // namespace pagoda::detail

// Not parenthesised on purpose: the message is streamed after it with <<.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define PAGODA_CHECK(cond) \
    (cond)                 \
        ? (void)0          \
        : ::pagoda::detail::Voidify() & ::pagoda::detail::CheckFailure(__FILE__, __LINE__, #cond)
// NOLINTEND(bugprone-macro-parentheses)
