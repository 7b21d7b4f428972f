#pragma once
// Memory sizes and durations as people write them, for flags, config files and the admin
// API alike: "512MiB", "2GiB", "1G", "4096" (bytes), or a number in (0, 1) for a fraction of
// RAM; "30s", "5m", "1h".

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace pagoda {

// Bytes; errors name the value and the allowed units (K, KiB, M, MiB, G, GiB).
Result<int64_t> parse_memory(const std::string& s);

// "5m", "30s", "1h", "500ms", "1d" to milliseconds (rule files, flags, the admin API).
Result<int64_t> parse_duration_ms(std::string_view text);
std::string format_duration(int64_t ms);  // the shortest exact form: 300000 -> "5m"

}  // namespace pagoda
