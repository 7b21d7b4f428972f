#pragma once
// Memory sizes as people write them, for flags, config files and the admin API alike:
// "512MiB", "2GiB", "1G", "4096" (bytes), or a number in (0, 1) for a fraction of RAM.

#include <cstdint>
#include <string>

#include "base/result.h"

namespace pagoda {

// Bytes; errors name the value and the allowed units (K, KiB, M, MiB, G, GiB).
Result<int64_t> parse_memory(const std::string& s);

}  // namespace pagoda
