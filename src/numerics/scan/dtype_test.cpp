#include "numerics/scan/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpudiag::numerics {
namespace {

TEST(DType, DecodesKnownPatternsExactly) {
  EXPECT_EQ(float_bits_to_double(DType::F16, 0x3C00), 1.0);
  EXPECT_EQ(float_bits_to_double(DType::F16, 0x7BFF), 65504.0);
  EXPECT_EQ(float_bits_to_double(DType::F16, 0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(float_bits_to_double(DType::F16, 0xFC00), -INFINITY);
  EXPECT_TRUE(std::isnan(float_bits_to_double(DType::F16, 0x7E00)));
  EXPECT_EQ(float_bits_to_double(DType::BF16, 0x3F80), 1.0);
  EXPECT_EQ(float_bits_to_double(DType::BF16, 0x7F7F), 3.3895313892515355e38);
  EXPECT_EQ(float_bits_to_double(DType::F8_E4M3, 0x7E), 448.0);
  EXPECT_EQ(float_bits_to_double(DType::F8_E4M3, 0x78), 256.0);  // no inf: exponent 15 is finite
  EXPECT_EQ(float_bits_to_double(DType::F8_E4M3, 0x01), std::ldexp(1.0, -9));
  EXPECT_TRUE(std::isnan(float_bits_to_double(DType::F8_E4M3, 0xFF)));
  EXPECT_EQ(float_bits_to_double(DType::F8_E5M2, 0x7B), 57344.0);
  EXPECT_EQ(float_bits_to_double(DType::F8_E5M2, 0x7C), INFINITY);
  EXPECT_EQ(float_bits_to_double(DType::F8_E5M2, 0x01), std::ldexp(1.0, -16));
  EXPECT_EQ(float_bits_to_double(DType::F32, 0x00000001), std::ldexp(1.0, -149));
  EXPECT_EQ(float_bits_to_double(DType::F64, 0x3FF0000000000000ull), 1.0);
  EXPECT_EQ(float_bits_to_double(DType::F64, 0x8000000000000000ull), 0.0);
  EXPECT_TRUE(std::signbit(float_bits_to_double(DType::F64, 0x8000000000000000ull)));
}

TEST(DType, ThresholdIsTheFirstPatternAtOrAbove) {
  EXPECT_EQ(float_threshold_bits(DType::BF16, 1e4), 0x461Du);   // 10048; 9984 is below
  EXPECT_EQ(float_threshold_bits(DType::F16, 1e4), 0x70E2u);    // exactly 10000
  EXPECT_EQ(float_threshold_bits(DType::F8_E4M3, 1e2), 0x6Du);  // 104
  EXPECT_EQ(float_threshold_bits(DType::F8_E4M3, 1e3), 0x7Fu);  // past 448: the NaN pattern
  EXPECT_EQ(float_threshold_bits(DType::F8_E5M2, 1e4), 0x71u);  // 10240
  EXPECT_EQ(float_threshold_bits(DType::F32, 1e2), 0x42C80000u);
}

TEST(DType, NamesRoundTripAndAliasesResolve) {
  for (DType t : kAllDTypes) {
    EXPECT_EQ(dtype_from_safetensors(dtype_name(t)), t);
    EXPECT_EQ(dtype_from_user(dtype_name(t)), t);
  }
  EXPECT_EQ(dtype_from_user("bfloat16"), DType::BF16);
  EXPECT_EQ(dtype_from_user("f8_e4m3"), DType::F8_E4M3);
  EXPECT_EQ(dtype_from_user("float8_e5m2"), DType::F8_E5M2);
  EXPECT_EQ(dtype_from_safetensors("bf16"), std::nullopt);
  EXPECT_EQ(dtype_from_user("F7"), std::nullopt);
}

}  // namespace
}  // namespace gpudiag::numerics
