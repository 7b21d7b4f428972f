#pragma once
// fp16 and bf16 storage types with exact conversions to and from float
// (g++ 12 has no std::float16_t / std::bfloat16_t). Pure functions, thread-safe.

#include <cstdint>
#include <cstring>

namespace pagoda {

inline float bits_to_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline uint32_t float_to_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

inline float fp16_to_float(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0) {
        if (mant == 0) return bits_to_float(sign);
        // subnormal: value = mant * 2^-24
        float f = float(mant) * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    if (exp == 31) return bits_to_float(sign | 0x7f800000u | (mant << 13));
    return bits_to_float(sign | ((exp + 112) << 23) | (mant << 13));
}

// Round to nearest even.
inline uint16_t float_to_fp16(float f) {
    const uint32_t x = float_to_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000;
    const uint32_t absx = x & 0x7fffffff;
    if (absx >= 0x7f800000u) return uint16_t(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
    if (absx >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // overflow to inf
    if (absx < 0x38800000u) {                                 // subnormal or zero in fp16
        // value / 2^-24, rounded to nearest even
        const float v = bits_to_float(absx) * 16777216.0f;
        uint32_t m = uint32_t(v);
        const float rem = v - float(m);
        if (rem > 0.5f || (rem == 0.5f && (m & 1))) ++m;
        return uint16_t(sign | m);
    }
    uint32_t e = ((absx >> 23) - 112) << 10;
    uint32_t m = (absx >> 13) & 0x3ff;
    uint32_t h = e | m;
    const uint32_t round_bits = absx & 0x1fff;
    if (round_bits > 0x1000 || (round_bits == 0x1000 && (h & 1))) ++h;
    return uint16_t(sign | h);
}

inline float bf16_to_float(uint16_t b) { return bits_to_float(uint32_t(b) << 16); }

inline uint16_t float_to_bf16(float f) {
    uint32_t x = float_to_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);  // quiet NaN
    x += 0x7fff + ((x >> 16) & 1);
    return uint16_t(x >> 16);
}

}  // namespace pagoda
