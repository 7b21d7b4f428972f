#pragma once
// Result<T> and Error: expected failures as values (bad input, bad file, peer gone).
// Used by every module; plain value types, thread-compatible.
// g++ 12 has no std::expected, so this is our own small variant-based one.

#include <fmt/core.h>

#include <string>
#include <utility>
#include <variant>

namespace pagoda {

enum class ErrorCode {
    kInvalidArgument,    // a caller, flag or request value is out of range
    kInvalidFile,        // a file is malformed, truncated or inconsistent
    kUnsupported,        // well-formed but not supported (architecture, tensor type)
    kNotFound,           // a file, key or tensor does not exist
    kIo,                 // the operating system refused (open, mmap, read)
    kOutOfRange,         // e.g. prompt longer than the context
    kResourceExhausted,  // a queue or pool is full now; retrying later may succeed
    kConflict,           // the state changed under the caller (a concurrent change won)
    kInternal,
};

const char* error_code_name(ErrorCode code);

struct Error {
    ErrorCode code = ErrorCode::kInternal;
    std::string message;
};

template <typename... Args>
Error make_error(ErrorCode code, fmt::format_string<Args...> f, Args&&... args) {
    return Error{code, fmt::format(f, std::forward<Args>(args)...)};
}

template <typename T>
class [[nodiscard]] Result {
  public:
    Result(T value) : v_(std::move(value)) {}      // NOLINT(implicit)
    Result(Error error) : v_(std::move(error)) {}  // NOLINT(implicit)

    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }
    T& value() & { return std::get<0>(v_); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    T* operator->() { return &std::get<0>(v_); }
    const T* operator->() const { return &std::get<0>(v_); }
    T& operator*() & { return std::get<0>(v_); }
    const T& operator*() const& { return std::get<0>(v_); }
    T&& operator*() && { return std::get<0>(std::move(v_)); }
    const Error& error() const { return std::get<1>(v_); }

  private:
    std::variant<T, Error> v_;
};

// Result<void>: success carries nothing.
struct Ok {};
using Status = Result<Ok>;
inline Status ok_status() { return Ok{}; }

}  // namespace pagoda

// Propagate an error from an expression returning Result<...>.
#define PAGODA_TRY(expr)                                       \
    do {                                                       \
        auto&& pagoda_try_r_ = (expr);                         \
        if (!pagoda_try_r_.ok()) return pagoda_try_r_.error(); \
    } while (0)

#define PAGODA_CONCAT_INNER(a, b) a##b
#define PAGODA_CONCAT(a, b) PAGODA_CONCAT_INNER(a, b)
// Declare `lhs` from a Result or return its error. (`lhs` is a declaration: no parentheses.)
// NOLINTBEGIN(bugprone-macro-parentheses)
#define PAGODA_ASSIGN_OR_RETURN(lhs, expr)                 \
    auto PAGODA_CONCAT(pagoda_r_, __LINE__) = (expr);      \
    if (!PAGODA_CONCAT(pagoda_r_, __LINE__).ok())          \
        return PAGODA_CONCAT(pagoda_r_, __LINE__).error(); \
    lhs = std::move(PAGODA_CONCAT(pagoda_r_, __LINE__)).value()
// NOLINTEND(bugprone-macro-parentheses)
