#pragma once
// StrongId<Tag, Rep>: an integer id that does not mix with other ids or plain numbers
// (SeqId, BlockId). Constructed explicitly, compared, hashed, formatted with fmt and
// streamed; ++ for id counters. Header-only; a value type.

#include <fmt/format.h>

#include <compare>
#include <cstddef>
#include <functional>
#include <ostream>

namespace pagoda {

template <typename Tag, typename Rep>
class StrongId {
  public:
    using rep_type = Rep;
    constexpr StrongId() = default;
    constexpr explicit StrongId(Rep v) : v_(v) {}
    constexpr Rep value() const { return v_; }
    friend constexpr auto operator<=>(StrongId, StrongId) = default;
    constexpr StrongId& operator++() {
        ++v_;
        return *this;
    }
    constexpr StrongId operator++(int) {
        StrongId old = *this;
        ++v_;
        return old;
    }
    friend std::ostream& operator<<(std::ostream& os, StrongId id) { return os << id.v_; }

  private:
    Rep v_{};
};

}  // namespace pagoda

template <typename Tag, typename Rep>
struct std::hash<pagoda::StrongId<Tag, Rep>> {
    size_t operator()(pagoda::StrongId<Tag, Rep> id) const { return std::hash<Rep>{}(id.value()); }
};

template <typename Tag, typename Rep>
struct fmt::formatter<pagoda::StrongId<Tag, Rep>> : fmt::formatter<Rep> {
    auto format(pagoda::StrongId<Tag, Rep> id, fmt::format_context& ctx) const {
        return fmt::formatter<Rep>::format(id.value(), ctx);
    }
};
