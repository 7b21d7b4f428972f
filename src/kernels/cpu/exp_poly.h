#pragma once
// The exponential of the attention softmax, shared by its Highway path (flash_attention.cpp)
// and its AVX-512 BF16 path (attention_bf16.cpp, compiled outside Highway's targets):
// e^x = 2^n 2^f with t = x log2(e), n = round(t), f = t - n (|f| <= 1/2), and 2^f from the
// degree-5 Taylor polynomial of e^(f ln 2) (relative error under 3e-6). Both paths
// evaluate it by Horner's rule from kExp2Poly[0], so they agree bit for bit.

namespace pagoda::kernels::cpu {

inline constexpr float kLog2e = 1.44269504f;
// (ln 2)^k / k! for k = 5 down to 0.
inline constexpr float kExp2Poly[6] = {1.33335581e-3f, 9.61812911e-3f, 5.55041087e-2f,
                                       2.40226507e-1f, 6.93147181e-1f, 1.0f};

}  // namespace pagoda::kernels::cpu
