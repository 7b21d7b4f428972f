#pragma once
// ggml tensor types as stored in GGUF files: ids, block sizes and names.
// Pure data; thread-safe. Which types the engine computes with is decided in model/.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace pagoda::formats {

enum class TensorType : uint32_t {
    kF32 = 0,
    kF16 = 1,
    kQ4_0 = 2,
    kQ4_1 = 3,
    kQ5_0 = 6,
    kQ5_1 = 7,
    kQ8_0 = 8,
    kQ8_1 = 9,
    kQ2_K = 10,
    kQ3_K = 11,
    kQ4_K = 12,
    kQ5_K = 13,
    kQ6_K = 14,
    kQ8_K = 15,
    kIQ2_XXS = 16,
    kIQ2_XS = 17,
    kIQ3_XXS = 18,
    kIQ1_S = 19,
    kIQ4_NL = 20,
    kIQ3_S = 21,
    kIQ2_S = 22,
    kIQ4_XS = 23,
    kI8 = 24,
    kI16 = 25,
    kI32 = 26,
    kI64 = 27,
    kF64 = 28,
    kIQ1_M = 29,
    kBF16 = 30,
    kTQ1_0 = 34,
    kTQ2_0 = 35,
};

struct TensorTypeTraits {
    const char* name;
    uint32_t block_elems;  // elements per block (1 for plain types)
    uint32_t block_bytes;  // bytes per block
};

// nullopt for an id that is not a ggml type at all.
std::optional<TensorTypeTraits> tensor_type_traits(uint32_t id);
std::string tensor_type_name(TensorType t);
// Parses "f32", "F16", "q8_0", ... (case-insensitive).
std::optional<TensorType> parse_tensor_type(const std::string& name);

// Q8_0: 32 weights = fp16 scale d + 32 int8; w = d * q.
struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q4_0: 32 weights = fp16 scale d + 16 bytes; w[j] = d * ((qs[j] & 15) - 8),
// w[j + 16] = d * ((qs[j] >> 4) - 8) for j < 16.
struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_0) == 18);

inline constexpr int kQBlock = 32;

// K-quants: super-blocks of 256 weights (ggml's k-quant layouts).
inline constexpr int kQKBlock = 256;

// Q4_K: 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min packed in `scales`
// (k_scale_min); w = d * sc_j * q - dmin * m_j with q in 0..15. `qs` holds 4 chunks of
// 64 weights in 32 bytes each: the low nibbles are weights 0..31 of the chunk, the high
// nibbles weights 32..63.
struct BlockQ4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K: Q4_K's layout plus a fifth bit: bit 2c of qh[l] is the high bit of weight l of
// chunk c, bit 2c + 1 that of weight l + 32; q in 0..31.
struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: 16 sub-blocks of 16 weights with int8 scales; w = d * scales[e / 16] * (q - 32),
// q in 0..63. Per half of 128 weights (ql += 64, qh += 32): weight l (l < 32) takes
// the low nibble of ql[l] and bits 0-1 of qh[l], l + 32 the low nibble of ql[l + 32] and
// bits 2-3, l + 64 the high nibble of ql[l] and bits 4-5, l + 96 the high nibble of
// ql[l + 32] and bits 6-7.
struct BlockQ6_K {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// Scale and min (6 bits each) of sub-block j (0..7) of a Q4_K/Q5_K `scales` array.
inline void k_scale_min(int j, const uint8_t* q, int* sc, int* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

inline bool is_k_quant(TensorType t) {
    return t == TensorType::kQ4_K || t == TensorType::kQ5_K || t == TensorType::kQ6_K;
}

}  // namespace pagoda::formats
