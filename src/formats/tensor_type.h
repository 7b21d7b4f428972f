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

}  // namespace pagoda::formats
