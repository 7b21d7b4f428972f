// libFuzzer target: the weight cache file parser (model/weight_cache_format.cpp) must
// reject or accept any byte string without reading out of bounds, and every entry it
// accepts must lie inside the bytes (its first and last byte are read here).
#include <cstddef>
#include <cstdint>
#include <span>

#include "model/weight_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto h = pagoda::model::parse_weight_cache(std::span<const uint8_t>(data, size));
    if (!h.ok()) return 0;
    for (const auto& e : h->entries) {
        volatile uint8_t sink = data[e.offset] ^ data[e.offset + e.size - 1];
        (void)sink;
    }
    return 0;
}
