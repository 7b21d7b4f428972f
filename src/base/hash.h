#pragma once
// The splitmix64 finalizer: a cheap 64-bit avalanche for hash mixing (the router's
// rendezvous hashing).

#include <cstdint>

namespace pagoda {

inline uint64_t splitmix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

}  // namespace pagoda
