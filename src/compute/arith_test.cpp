// The compute check's arithmetic on the CPU: its inputs are what math.h says,
// the GEMM is a GEMM, the checksum is the same bit for bit every time and
// moves with one flipped bit, and a tiny input gives a known checksum (a
// change of the arithmetic shows here before it splits a job's ranks).
#include "compute/arith.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "compute/run.h"

namespace gpudiag::compute {
namespace {

float as_float(std::uint32_t bits) { return std::bit_cast<float>(bits); }

TEST(ComputeArith, InputsAreExactAtTheirPrecisionAndInRange) {
  for (std::uint64_t i = 0; i < 4096; ++i) {
    const float f32 = as_float(input_fp32(0, i));
    EXPECT_GE(std::fabs(f32), 0.25f);
    EXPECT_LT(std::fabs(f32), 2.0f);
    // bf16 is fp32 with the low 16 bits cleared.
    EXPECT_EQ(input_as_fp32(Precision::bf16, 0, i), input_fp32(0, i) & 0xffff0000u);
    // fp16: sign, 2^(e-15) and 10 mantissa bits, as the format defines them.
    const std::uint16_t h = input_fp16(1, i);
    const int e = (h >> 10) & 0x1f;
    const double want = (h & 0x8000 ? -1.0 : 1.0) * std::ldexp(1.0 + (h & 0x3ff) / 1024.0, e - 15);
    EXPECT_EQ(static_cast<double>(as_float(fp16_to_fp32(h))), want) << i;
    EXPECT_GE(std::fabs(want), 0.25);
    EXPECT_LT(std::fabs(want), 2.0);
  }
  EXPECT_NE(input_fp32(0, 7), input_fp32(1, 7));  // A and B are different draws
}

TEST(ComputeArith, TheGemmIsAGemm) {
  const int n = 32;
  const auto c = cpu_gemm(Precision::fp32, n);
  for (int i = 0; i < n; i += 7)
    for (int j = 0; j < n; j += 5) {
      double want = 0;
      for (int k = 0; k < n; ++k)
        want += static_cast<double>(as_float(input_fp32(0, i * n + k))) *
                as_float(input_fp32(1, k * n + j));
      EXPECT_NEAR(c[i * n + j], want, 1e-4 * (1 + std::fabs(want))) << i << "," << j;
    }
}

TEST(ComputeArith, BitExactEveryTime) {
  for (Precision p : {Precision::bf16, Precision::fp16, Precision::fp32}) {
    const auto a = cpu_gemm(p, 48), b = cpu_gemm(p, 48);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << precision_name(p);
    EXPECT_EQ(checksum(a.data(), a.size()), checksum(b.data(), b.size()));
  }
}

TEST(ComputeArith, KnownChecksumsOfATinyInput) {
  // n = 16: the values every build must give; a change to the inputs, the
  // GEMM's order or the reduction changes them (and then every GPU's).
  auto sum = [](Precision p) {
    const auto c = cpu_gemm(p, 16);
    return hex64(checksum(c.data(), c.size()));
  };
  EXPECT_EQ(sum(Precision::bf16), "e4aaf4d777a1dea4");
  EXPECT_EQ(sum(Precision::fp16), "1028ff08eb4623fe");
  EXPECT_EQ(sum(Precision::fp32), "431cb401e041a08d");
}

TEST(ComputeArith, OneFlippedBitChangesTheChecksum) {
  auto c = cpu_gemm(Precision::bf16, 64);
  const auto before = checksum(c.data(), c.size());
  flip_bit(c.data(), 64);
  EXPECT_NE(checksum(c.data(), c.size()), before);
  flip_bit(c.data(), 64);
  EXPECT_EQ(checksum(c.data(), c.size()), before);
  // Each element's bits and its place count, not only the sum.
  std::swap(c[0], c[1]);
  EXPECT_NE(checksum(c.data(), c.size()), before);
}

TEST(ComputeArith, TheChecksumCoversEveryElementPastOneStride) {
  // More elements than the reduction's threads: each thread takes several.
  std::vector<float> v(3 * kReduceBlocks * kReduceThreads + 5, 1.0f);
  const auto before = checksum(v.data(), v.size());
  v.back() = 2.0f;
  EXPECT_NE(checksum(v.data(), v.size()), before);
}

TEST(ComputeRun, TheHostRunRepeatsAndAgreesWithItself) {
  ComputeOptions o;
  o.seconds = 0;  // twice each, no more
  o.n = 16;
  o.model = "CPU test";
  const auto r = run_compute(o);
  ASSERT_EQ(r.parts.size(), 3u);
  EXPECT_EQ(r.judged, "");  // stable: judged at the exchange
  EXPECT_EQ(r.device, "host");
  for (const auto& p : r.parts) {
    EXPECT_EQ(p.repeats, 2);
    EXPECT_EQ(p.flops, 2 * 2.0 * 16 * 16 * 16);
  }
  EXPECT_EQ(r.parts[0].name, "bf16 GEMM");
  EXPECT_EQ(r.parts[0].checksum, "e4aaf4d777a1dea4");
  EXPECT_GT(r.tflops, 0);
  // The test hook's flip: every repetition alike, so the rank is stable
  // and its checksum differs from its peers'.
  o.flip = true;
  const auto f = run_compute(o);
  EXPECT_EQ(f.judged, "");
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NE(f.parts[i].checksum, r.parts[i].checksum);
}

}  // namespace
}  // namespace gpudiag::compute
