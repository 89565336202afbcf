// host_reduce's conversions and reductions: half and bfloat16 round to
// nearest even (subnormals, the 65504 edge, inf, nan), integers wrap, and
// avg divides once at the end.
#include "comm/host_reduce.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace gpudiag {
namespace {

float bits_to_float(std::uint32_t b) { return std::bit_cast<float>(b); }
bool half_is_nan(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16_is_nan(std::uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

TEST(HostReduce, HalfDecodesKnownPatterns) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_to_float(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(half_to_float(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_to_float(0x7c00), INFINITY);
  EXPECT_EQ(half_to_float(0xfc00), -INFINITY);
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
}

TEST(HostReduce, HalfRoundsToNearestEven) {
  const float one = 1.0f, ulp = std::ldexp(1.0f, -10);
  EXPECT_EQ(float_to_half(one + ulp / 2), 0x3c00);     // tie: stays even
  EXPECT_EQ(float_to_half(one + ulp * 1.5f), 0x3c02);  // tie: up to even
  EXPECT_EQ(float_to_half(one + ulp / 2 + std::ldexp(1.0f, -20)), 0x3c01);
  // The top of the range: 65520 is halfway to 65536, which is inf.
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_half(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_half(1e10f), 0x7c00);
  // Subnormals: steps of 2^-24, ties to even, down to a signed zero.
  const float sub = std::ldexp(1.0f, -24);
  EXPECT_EQ(float_to_half(sub), 0x0001);
  EXPECT_EQ(float_to_half(sub / 2), 0x0000);
  EXPECT_EQ(float_to_half(sub * 0.75f), 0x0001);
  EXPECT_EQ(float_to_half(sub * 1.5f), 0x0002);
  EXPECT_EQ(float_to_half(sub * 2.5f), 0x0002);
  EXPECT_EQ(float_to_half(sub * 1023.5f), 0x0400);  // up into the normals
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(float_to_half(-sub), 0x8001);
  EXPECT_EQ(float_to_half(-sub / 4), 0x8000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(INFINITY), 0x7c00);
  EXPECT_EQ(float_to_half(-INFINITY), 0xfc00);
  EXPECT_TRUE(half_is_nan(float_to_half(NAN)));
  EXPECT_TRUE(half_is_nan(float_to_half(bits_to_float(0x7f800001u))));  // signalling payload
}

TEST(HostReduce, HalfRoundTripsEveryPattern) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const auto x = static_cast<std::uint16_t>(h);
    if (half_is_nan(x))
      EXPECT_TRUE(half_is_nan(float_to_half(half_to_float(x))));
    else
      EXPECT_EQ(float_to_half(half_to_float(x)), x) << std::hex << h;
  }
}

#ifdef __FLT16_MAX__
// Against the compiler's own conversion: every halfway point between two
// halves (the ties), and a spread of float patterns across the whole range.
TEST(HostReduce, HalfMatchesTheCompilersConversion) {
  auto compiler = [](float f) { return std::bit_cast<std::uint16_t>(static_cast<_Float16>(f)); };
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {
    const float lo = half_to_float(static_cast<std::uint16_t>(h));
    const float hi = h + 1 == 0x7c00 ? 65536.0f : half_to_float(static_cast<std::uint16_t>(h + 1));
    const float mid = lo + (hi - lo) / 2;  // exact in float
    ASSERT_EQ(float_to_half(mid), compiler(mid)) << mid;
    ASSERT_EQ(float_to_half(-mid), compiler(-mid)) << -mid;
  }
  for (std::uint64_t b = 0; b <= 0xffffffffu; b += 4093) {
    const float f = bits_to_float(static_cast<std::uint32_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), compiler(f)) << std::hex << b;
  }
}
#endif

// Round to nearest even by distance, independent of the bit trick under test.
std::uint16_t bf16_reference(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t lo = x & 0xffff0000u, hi = lo + 0x10000u;
  auto value = [](std::uint32_t b) {  // past the largest finite: 2^128
    return (b & 0x7fffffffu) == 0x7f800000u ? std::copysign(std::ldexp(1.0, 128), bits_to_float(b))
                                            : static_cast<double>(bits_to_float(b));
  };
  const double dl = std::fabs(f - value(lo)), dh = std::fabs(value(hi) - f);
  const std::uint32_t pick = dl < dh ? lo : dh < dl ? hi : ((lo >> 16) & 1 ? hi : lo);
  return static_cast<std::uint16_t>(pick >> 16);
}

TEST(HostReduce, Bfloat16RoundsToNearestEven) {
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_float(0x7f7f), 3.3895313892515355e38f);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie: stays even
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);  // tie: up to even
  EXPECT_EQ(float_to_bf16(bits_to_float(0x7f7f7fffu)), 0x7f7f);   // largest finite
  EXPECT_EQ(float_to_bf16(bits_to_float(0x7f7f8000u)), 0x7f80);   // tie: up to inf
  EXPECT_EQ(float_to_bf16(bits_to_float(0x00008000u)), 0x0000);   // subnormal tie
  EXPECT_EQ(float_to_bf16(bits_to_float(0x00018000u)), 0x0002);
  EXPECT_EQ(float_to_bf16(bits_to_float(0x80008001u)), 0x8001);
  EXPECT_EQ(float_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(float_to_bf16(-INFINITY), 0xff80);
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(NAN)));
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(bits_to_float(0x7f800001u))));  // not rounded to inf
  for (std::uint64_t b = 0; b <= 0xffffffffu; b += 4093) {
    const float f = bits_to_float(static_cast<std::uint32_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16(f), bf16_reference(f)) << std::hex << b;
  }
}

template <class T>
T reduce2(T a, T b, DType t, RedOp op) {
  reduce_into(&a, &b, 1, t, op);
  return a;
}

TEST(HostReduce, IntegersWrapInTwosComplement) {
  EXPECT_EQ(reduce2<std::int8_t>(100, 100, DType::int8, RedOp::sum), -56);
  EXPECT_EQ(reduce2<std::uint8_t>(200, 100, DType::uint8, RedOp::sum), 44);
  EXPECT_EQ(reduce2<std::int32_t>(INT32_MAX, 1, DType::int32, RedOp::sum), INT32_MIN);
  EXPECT_EQ(reduce2<std::uint32_t>(0, UINT32_MAX, DType::uint32, RedOp::avg), UINT32_MAX);
  EXPECT_EQ(reduce2<std::int64_t>(INT64_MIN, -1, DType::int64, RedOp::sum), INT64_MAX);
  EXPECT_EQ(reduce2<std::uint64_t>(UINT64_MAX, 2, DType::uint64, RedOp::sum), 1u);
  EXPECT_EQ(reduce2<std::int8_t>(16, 16, DType::int8, RedOp::prod), 0);
  EXPECT_EQ(reduce2<std::int8_t>(-128, -1, DType::int8, RedOp::prod), -128);
  EXPECT_EQ(reduce2<std::uint8_t>(255, 255, DType::uint8, RedOp::prod), 1);
  EXPECT_EQ(reduce2<std::int64_t>(INT64_MIN, -1, DType::int64, RedOp::prod), INT64_MIN);
  EXPECT_EQ(reduce2<std::int8_t>(-1, 1, DType::int8, RedOp::max), 1);
  EXPECT_EQ(reduce2<std::int8_t>(-1, 1, DType::int8, RedOp::min), -1);
  EXPECT_EQ(reduce2<std::uint8_t>(255, 0, DType::uint8, RedOp::max), 255);
  EXPECT_EQ(reduce2<std::uint64_t>(UINT64_MAX, 0, DType::uint64, RedOp::min), 0u);
}

TEST(HostReduce, SixteenBitTypesRoundAfterEveryStep) {
  std::uint16_t acc = float_to_half(0.0f);
  const std::uint16_t one = float_to_half(1.0f);
  for (int i = 0; i < 3000; ++i) reduce_into(&acc, &one, 1, DType::half, RedOp::sum);
  EXPECT_EQ(half_to_float(acc), 2048.0f);  // 2048 + 1 rounds back to 2048
  acc = float_to_bf16(0.0f);
  const std::uint16_t bone = float_to_bf16(1.0f);
  for (int i = 0; i < 300; ++i) reduce_into(&acc, &bone, 1, DType::bfloat16, RedOp::sum);
  EXPECT_EQ(bf16_to_float(acc), 256.0f);
  EXPECT_EQ(
      reduce2<std::uint16_t>(float_to_half(3.0f), float_to_half(-2.0f), DType::half, RedOp::prod),
      float_to_half(-6.0f));
  EXPECT_EQ(reduce2<std::uint16_t>(float_to_half(300.0f), float_to_half(300.0f), DType::half,
                                   RedOp::prod),
            0x7c00);  // 90000 overflows to inf
  EXPECT_EQ(reduce2<std::uint16_t>(float_to_bf16(-3.0f), float_to_bf16(2.0f), DType::bfloat16,
                                   RedOp::min),
            float_to_bf16(-3.0f));
}

TEST(HostReduce, FloatingMaxAndMinPropagateNan) {
  EXPECT_TRUE(std::isnan(reduce2<float>(NAN, 1.0f, DType::float32, RedOp::max)));
  EXPECT_TRUE(std::isnan(reduce2<float>(1.0f, NAN, DType::float32, RedOp::min)));
  EXPECT_TRUE(std::isnan(reduce2<double>(NAN, 1.0, DType::float64, RedOp::max)));
  EXPECT_TRUE(
      half_is_nan(reduce2<std::uint16_t>(0x7e00, float_to_half(1.0f), DType::half, RedOp::max)));
  EXPECT_TRUE(bf16_is_nan(
      reduce2<std::uint16_t>(float_to_bf16(1.0f), 0x7fc0, DType::bfloat16, RedOp::min)));
}

TEST(HostReduce, AvgDividesOnceAtTheEnd) {
  std::int32_t i32[] = {7, -7, INT32_MIN};
  finish_avg(i32, 3, DType::int32, 2);
  EXPECT_EQ(i32[0], 3);
  EXPECT_EQ(i32[1], -3);  // truncated toward zero
  EXPECT_EQ(i32[2], INT32_MIN / 2);
  // The rank count is not cut to the element type.
  std::int8_t i8[] = {-128, 127, 100};
  finish_avg(i8, 3, DType::int8, 200);
  EXPECT_EQ(i8[0], 0);
  std::int8_t small[] = {100};
  finish_avg(small, 1, DType::int8, 50);
  EXPECT_EQ(small[0], 2);
  std::uint8_t u8[] = {255, 200};
  finish_avg(u8, 2, DType::uint8, 256);  // 256 ranks: not a division by zero
  EXPECT_EQ(u8[0], 0);
  std::uint64_t u64[] = {UINT64_MAX};
  finish_avg(u64, 1, DType::uint64, 65536);
  EXPECT_EQ(u64[0], UINT64_MAX / 65536);
  float f[] = {3.0f};
  finish_avg(f, 1, DType::float32, 3);
  EXPECT_EQ(f[0], 3.0f * (1.0f / 3.0f));
  std::uint16_t h[] = {float_to_half(3.0f)};
  finish_avg(h, 1, DType::half, 3);
  const float third = half_to_float(float_to_half(1.0f / 3.0f));
  EXPECT_EQ(h[0], float_to_half(3.0f * third));
}

}  // namespace
}  // namespace gpudiag
