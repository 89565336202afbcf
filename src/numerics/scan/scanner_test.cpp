// The CPU scanner against the element-at-a-time reference, for every dtype:
// random bit patterns, the special values (nan, +-inf, +-0, subnormals, max
// finite, fp8 without inf), tensors large enough to be split across threads,
// misaligned and big-endian data.
#include "numerics/scan/scanner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "numerics/scan/scan_kernels.h"
#include "numerics/scan/scan_reference.h"

namespace gpudiag::numerics {
namespace {

using testing::reference_scan;

std::string describe(const TensorStats& s) {
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "count=%llu min=%.17g max=%.17g nan=%llu +inf=%llu -inf=%llu zero=%llu sub=%llu "
                "ge=%llu/%llu/%llu",
                (unsigned long long)s.count, s.abs_min, s.abs_max, (unsigned long long)s.nan,
                (unsigned long long)s.pos_inf, (unsigned long long)s.neg_inf,
                (unsigned long long)s.zero, (unsigned long long)s.subnormal,
                (unsigned long long)s.ge_1e2, (unsigned long long)s.ge_1e3,
                (unsigned long long)s.ge_1e4);
  return buf;
}

#define EXPECT_SAME_STATS(a, b) \
  EXPECT_TRUE(same_stats(a, b)) << describe(a) << "\n vs reference\n" << describe(b)

/// Little-endian bytes of `count` random elements with the `special`
/// patterns spread evenly among them. Without `nan`, random NaN patterns are
/// turned into numbers (a single NaN would make min and max NaN).
std::vector<std::uint8_t> make_data(DType t, std::size_t count, std::mt19937_64& rng,
                                    const std::vector<std::uint64_t>& special, bool nan = true) {
  const std::size_t es = dtype_size(t);
  std::vector<std::uint64_t> bits(count);
  for (auto& b : bits) {
    b = rng();
    if (!nan && is_float(t)) {
      const FloatFormat& f = float_format(t);
      const std::uint64_t abs = b & (f.sign_mask - 1);
      if (abs > f.nan_above()) b &= ~(f.sign_mask >> 2);  // clear the exponent's second bit
    }
  }
  for (std::size_t j = 0; j < special.size() && j < count; ++j)
    bits[j * count / special.size()] = special[j];
  std::vector<std::uint8_t> data(count * es);
  for (std::size_t i = 0; i < count; ++i)
    for (std::size_t k = 0; k < es; ++k)
      data[i * es + k] = static_cast<std::uint8_t>(bits[i] >> (8 * k));
  return data;
}

/// Special bit patterns of a dtype: zeros, smallest/largest subnormal and
/// normal, max finite, inf, NaN, each with both signs, plus values at the thresholds.
std::vector<std::uint64_t> specials(DType t) {
  if (!is_float(t)) {
    const int w = static_cast<int>(dtype_size(t)) * 8;
    const std::uint64_t all = w == 64 ? ~0ull : (1ull << w) - 1;
    const std::uint64_t top = 1ull << (w - 1);
    std::vector<std::uint64_t> s = {0,  1,   all, top,  top - 1, top + 1,
                                    99, 100, 999, 1000, 9999,    10000};
    for (auto& v : s) v &= all;
    for (std::uint64_t x : {99ull, 100ull, 101ull, 1000ull, 10000ull}) s.push_back((0 - x) & all);
    return s;
  }
  const FloatFormat& f = float_format(t);
  std::vector<std::uint64_t> s = {
      0, 1, f.min_normal - 1, f.min_normal, f.max_finite, f.nan_above() + 1};
  if (f.has_inf) s.push_back(f.inf);
  for (double th : {1e2, 1e3, 1e4}) {
    const auto b = float_threshold_bits(t, th);
    s.push_back(b);
    if (b > 0) s.push_back(b - 1);
  }
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n; ++i) s.push_back(s[i] | f.sign_mask);
  return s;
}

TensorView view(DType t, const std::vector<std::uint8_t>& data, std::size_t offset_bytes = 0) {
  return {t, ByteOrder::little, data.data() + offset_bytes,
          (data.size() - offset_bytes) / dtype_size(t)};
}

class EveryDType : public ::testing::TestWithParam<DType> {};

/// specials(t) without its NaN patterns.
std::vector<std::uint64_t> numbers(DType t) {
  auto s = specials(t);
  if (!is_float(t)) return s;
  const FloatFormat& f = float_format(t);
  std::erase_if(s, [&](std::uint64_t b) { return (b & (f.sign_mask - 1)) > f.nan_above(); });
  return s;
}

TEST_P(EveryDType, SpecialAndRandomValuesMatchTheReference) {
  const DType t = GetParam();
  std::mt19937_64 rng(1234 + static_cast<int>(t));
  const auto data = make_data(t, 10007, rng, specials(t));
  const TensorView v = view(t, data);
  EXPECT_SAME_STATS(scan_range(v, 0, v.count), reference_scan(v));
}

TEST_P(EveryDType, RandomNumbersWithoutNanGiveExactMinAndMax) {
  const DType t = GetParam();
  std::mt19937_64 rng(77 + static_cast<int>(t));
  for (std::size_t count : {1, 2, 3, 17, 4095, 4096, 4097, 50000}) {
    const auto data =
        make_data(t, count, rng, count > 100 ? numbers(t) : std::vector<std::uint64_t>{}, false);
    const TensorView v = view(t, data);
    const TensorStats expected = reference_scan(v);
    ASSERT_EQ(expected.nan, 0u);
    EXPECT_SAME_STATS(scan_range(v, 0, v.count), expected) << count << " elements";
  }
}

TEST_P(EveryDType, EachSpecialValueAloneMatchesTheReference) {
  const DType t = GetParam();
  for (std::uint64_t bits : specials(t)) {
    std::mt19937_64 rng(1);
    const auto data = make_data(t, 1, rng, {bits});
    const TensorView v = view(t, data);
    EXPECT_SAME_STATS(scan_range(v, 0, 1), reference_scan(v)) << "pattern 0x" << std::hex << bits;
  }
}

TEST_P(EveryDType, DenseSpecialsDoNotWrapTheNarrowCountersOnEitherInstructionSet) {
  // Counters as wide as the elements count at most a sub-block before they
  // are flushed: a tensor made of one special value only is the worst case.
  const DType t = GetParam();
  for (std::uint64_t bits : specials(t)) {
    std::mt19937_64 rng(1);
    const auto data = make_data(t, 70001, rng, std::vector<std::uint64_t>(70001, bits));
    const TensorView v = view(t, data);
    const TensorStats expected = reference_scan(v);
    EXPECT_SAME_STATS(scan_range(v, 0, v.count), expected) << "pattern 0x" << std::hex << bits;
    EXPECT_SAME_STATS(scan_range_baseline(v, 0, v.count), expected)
        << "baseline, pattern 0x" << std::hex << bits;
  }
  std::mt19937_64 rng(99);
  const auto mixed = make_data(t, 10007, rng, specials(t));
  EXPECT_SAME_STATS(scan_range_baseline(view(t, mixed), 0, 10007), reference_scan(view(t, mixed)))
      << "baseline (" << scan_kernel_isa() << " here)";
}

TEST_P(EveryDType, ThreadedMisalignedAndBigEndianAgree) {
  const DType t = GetParam();
  const std::size_t es = dtype_size(t);
  std::mt19937_64 rng(99);
  // Over two scanner chunks, so ranges run on several threads.
  const std::size_t count = (std::size_t{1} << 21) + 12345;
  auto data = make_data(t, count, rng, numbers(t), false);
  const TensorView v = view(t, data);
  const TensorStats expected = reference_scan(v);

  auto scanner = make_cpu_scanner(4);
  EXPECT_SAME_STATS(scanner->scan(std::span(&v, 1))[0], expected);

  std::vector<std::uint8_t> shifted(data.size() + 1);
  std::memcpy(shifted.data() + 1, data.data(), data.size());
  const TensorView misaligned = view(t, shifted, 1);
  EXPECT_SAME_STATS(scanner->scan(std::span(&misaligned, 1))[0], expected);

  std::vector<std::uint8_t> swapped(data.size());
  for (std::size_t i = 0; i < count; ++i)
    for (std::size_t k = 0; k < es; ++k) swapped[i * es + k] = data[i * es + es - 1 - k];
  TensorView big = view(t, swapped);
  big.order = ByteOrder::big;
  EXPECT_SAME_STATS(scanner->scan(std::span(&big, 1))[0], expected);
}

INSTANTIATE_TEST_SUITE_P(Scanner, EveryDType, ::testing::ValuesIn(kAllDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Scanner, ManySmallAndEmptyTensorsKeepTheirOrder) {
  std::mt19937_64 rng(5);
  std::vector<std::vector<std::uint8_t>> store;
  std::vector<TensorView> views;
  for (int i = 0; i < 300; ++i) {
    const DType t = kAllDTypes[i % std::size(kAllDTypes)];
    store.push_back(
        make_data(t, static_cast<std::size_t>(i % 7 == 0 ? 0 : 1 + i * 13), rng, specials(t)));
  }
  for (int i = 0; i < 300; ++i)
    views.push_back(view(kAllDTypes[i % std::size(kAllDTypes)], store[i]));
  const auto stats = make_cpu_scanner(3)->scan(views);
  ASSERT_EQ(stats.size(), views.size());
  for (std::size_t i = 0; i < views.size(); ++i)
    EXPECT_SAME_STATS(stats[i], reference_scan(views[i])) << i;
}

TEST(Scanner, NanMakesBothEndsNan) {
  const float x[] = {1.0f, std::nanf(""), -3.0f};
  TensorView v{DType::F32, ByteOrder::little, reinterpret_cast<const std::uint8_t*>(x), 3};
  const TensorStats s = scan_range(v, 0, 3);
  EXPECT_TRUE(std::isnan(s.abs_min));
  EXPECT_TRUE(std::isnan(s.abs_max));
  EXPECT_EQ(s.nan, 1u);
}

TEST(Scanner, SignedIntegerAbsWrapsLikeTheFramework) {
  const std::int8_t x[] = {-128, 5, -7};
  TensorView v{DType::I8, ByteOrder::little, reinterpret_cast<const std::uint8_t*>(x), 3};
  const TensorStats s = scan_range(v, 0, 3);
  EXPECT_EQ(s.abs_min, -128.0);  // torch: tensor([-128], dtype=int8).abs() == -128
  EXPECT_EQ(s.abs_max, 7.0);
  EXPECT_EQ(s.ge_1e2, 1u);  // the magnitude 128 is >= 100
}

TEST(Scanner, ThresholdsCompareTheExactMagnitude) {
  // bf16 has no 10000: its neighbours are 9984 (0x461C) and 10048 (0x461D).
  const std::uint16_t x[] = {0x461C, 0x461D, 0x7F80};
  TensorView v{DType::BF16, ByteOrder::little, reinterpret_cast<const std::uint8_t*>(x), 3};
  const TensorStats s = scan_range(v, 0, 3);
  EXPECT_EQ(s.ge_1e4, 2u);  // 10048 and inf
  EXPECT_EQ(s.pos_inf, 1u);
}

}  // namespace
}  // namespace gpudiag::numerics
