// Memory sizes and durations with units (units.h).
#include "base/units.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <string>

namespace pagoda {

Result<int64_t> parse_memory(const std::string& s) {
    if (s.empty()) return make_error(ErrorCode::kInvalidArgument, "empty memory size");
    size_t end = 0;
    double v = 0;
    try {
        v = std::stod(s, &end);
    } catch (...) {
        return make_error(ErrorCode::kInvalidArgument,
                          "memory size '{}' is not a number (examples: 512MiB, 2GiB, 1G, 0.25 for "
                          "a fraction of RAM)",
                          s);
    }
    std::string unit = s.substr(end);
    double mult = 1;
    if (unit.empty()) {
        if (v > 0 && v < 1) {
            const double ram = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
            return int64_t(v * ram);
        }
    } else if (unit == "K" || unit == "KB") {
        mult = 1e3;
    } else if (unit == "KiB") {
        mult = 1024;
    } else if (unit == "M" || unit == "MB") {
        mult = 1e6;
    } else if (unit == "MiB") {
        mult = 1024.0 * 1024;
    } else if (unit == "G" || unit == "GB") {
        mult = 1e9;
    } else if (unit == "GiB") {
        mult = 1024.0 * 1024 * 1024;
    } else {
        return make_error(ErrorCode::kInvalidArgument,
                          "memory size '{}': unknown unit '{}' (allowed: K, KiB, M, MiB, G, GiB)",
                          s, unit);
    }
    if (!(v > 0) || !std::isfinite(v)) {
        return make_error(ErrorCode::kInvalidArgument, "memory size '{}' must be positive", s);
    }
    return int64_t(v * mult);
}

Result<int64_t> parse_duration_ms(std::string_view text) {
    struct Unit {
        const char* name;
        int64_t ms;
    };
    static const Unit kUnits[] = {
        {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000}};
    size_t i = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    const std::string_view unit = text.substr(i);
    if (i == 0 || i > 9) {
        return make_error(ErrorCode::kInvalidArgument,
                          "bad duration '{}': expected a whole number and a unit (ms, s, m, h, d), "
                          "e.g. 30s or 5m",
                          text);
    }
    const int64_t n = std::stoll(std::string(text.substr(0, i)));
    for (const Unit& u : kUnits) {
        if (unit == u.name) return n * u.ms;
    }
    return make_error(ErrorCode::kInvalidArgument,
                      "bad duration '{}': unit must be ms, s, m, h or d, e.g. 30s or 5m", text);
}

std::string format_duration(int64_t ms) {
    if (ms == 0) return "0s";
    if (ms % 86'400'000 == 0) return fmt::format("{}d", ms / 86'400'000);
    if (ms % 3'600'000 == 0) return fmt::format("{}h", ms / 3'600'000);
    if (ms % 60'000 == 0) return fmt::format("{}m", ms / 60'000);
    if (ms % 1000 == 0) return fmt::format("{}s", ms / 1000);
    return fmt::format("{}ms", ms);
}

}  // namespace pagoda
