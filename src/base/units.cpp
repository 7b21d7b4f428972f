// Memory sizes with units (units.h).
#include "base/units.h"

#include <unistd.h>

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

}  // namespace pagoda
