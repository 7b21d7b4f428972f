#include "base/half.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/result.h"

namespace pagoda {

TEST(Half, Fp16RoundTripsEveryFiniteValue) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        if (((h >> 10) & 0x1f) == 0x1f) continue;  // inf/nan
        const float f = fp16_to_float(uint16_t(h));
        EXPECT_EQ(float_to_fp16(f), uint16_t(h)) << h;
    }
}

TEST(Half, Fp16KnownValues) {
    EXPECT_EQ(fp16_to_float(0x3c00), 1.0f);
    EXPECT_EQ(fp16_to_float(0xc000), -2.0f);
    EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
    EXPECT_EQ(float_to_fp16(1e6f), 0x7c00);
    EXPECT_FLOAT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));
}

TEST(Half, Bf16RoundsToNearestEven) {
    EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
    // 1 + 2^-8 is exactly halfway between two bf16 values: ties to even (1.0).
    EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
    EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
}

TEST(ResultTest, CarriesValueOrError) {
    Result<int> a = 3;
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(*a, 3);
    Result<int> b = make_error(ErrorCode::kInvalidArgument, "bad {}", 7);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.error().message, "bad 7");
}

}  // namespace pagoda
