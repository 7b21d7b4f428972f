#pragma once
// Shared by weight_cache.cpp and weight_cache_format.cpp (and their tests).

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/weight_cache.h"

namespace pagoda::model {

inline constexpr uint64_t kWeightCacheAlign = 4096;  // entry offsets: at least this
inline constexpr uint64_t kWeightCacheHugeAlign = uint64_t(2) << 20;

// The writer starts an entry of 1 MiB or more at a 2 MiB boundary and pads it with zeros
// to whole 2 MiB pages, so the page cache holds it in 2 MiB folios that the kernel maps
// with 2 MiB pages (decode ran 7-14% slower with a tenth of the weights in 4 KiB pages);
// smaller entries start at 4 KiB boundaries, unpadded. The bytes an entry occupies:
inline uint64_t weight_cache_entry_align(uint64_t size) {
    return size >= (uint64_t(1) << 20) ? kWeightCacheHugeAlign : kWeightCacheAlign;
}
inline uint64_t weight_cache_entry_span(uint64_t size) {
    const uint64_t a = weight_cache_entry_align(size);
    return (size + a - 1) / a * a;
}

// A 64-bit hash of `b` (splitmix64 over 8-byte words): file identity, not cryptography.
uint64_t weight_cache_hash(std::span<const uint8_t> b, uint64_t seed);

// The header for `entries` (their sizes set), assigning each its offset.
std::vector<uint8_t> weight_cache_header(const std::string& key, std::vector<PackedEntry>& entries);

}  // namespace pagoda::model
