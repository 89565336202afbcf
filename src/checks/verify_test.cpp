#include "checks/verify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace gpudiag {
namespace {

/// Sums the contributions of `ranks` like an all-reduce would.
std::vector<float> reduce(const std::vector<int>& ranks, std::size_t n) {
  std::vector<float> out(n, 0.0f), mine(n);
  for (int r : ranks) {
    fill_contribution(mine.data(), n, r);
    for (std::size_t i = 0; i < n; ++i) out[i] += mine[i];
  }
  return out;
}

TEST(Verify, CorrectSumPasses) {
  auto sum = reduce({0, 1, 2, 3}, 10000);
  EXPECT_FALSE(verify_sum(sum.data(), sum.size(), ExpectedSum(4)));
}

TEST(Verify, ExactForLargeWorlds) {
  // 100,000 ranks * 96 < 2^24: every sum is an exactly representable integer.
  ExpectedSum e(100000);
  for (int k = 0; k < kPatternPeriod; ++k) EXPECT_EQ(e.at(k), std::floor(e.at(k)));
}

TEST(Verify, MissingRankIsNamed) {
  auto sum = reduce({0, 1, 3}, 5000);  // rank 2 never contributed
  auto m = verify_sum(sum.data(), sum.size(), ExpectedSum(4));
  ASSERT_TRUE(m);
  EXPECT_GT(m->count, 4000u);
  EXPECT_EQ(m->explanation, "rank 2's contribution is missing");
}

TEST(Verify, DoubledRankIsNamed) {
  auto sum = reduce({0, 1, 1, 2}, 5000);
  auto m = verify_sum(sum.data(), 5000, ExpectedSum(3));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->explanation, "rank 1's contribution is counted twice");
}

TEST(Verify, SingleCorruptElementAndShiftedChunk) {
  auto sum = reduce({0, 1}, 1000);
  sum[777] += 1.0f;
  auto m = verify_sum(sum.data(), sum.size(), ExpectedSum(2));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->count, 1u);
  EXPECT_EQ(m->first_index, 777u);
  sum = reduce({0, 1}, 1000);
  std::vector<float> shifted(sum.begin() + 1, sum.end());
  shifted.push_back(0);
  EXPECT_TRUE(verify_sum(shifted.data(), shifted.size(), ExpectedSum(2)));
}

TEST(Verify, NanNeverPasses) {
  auto sum = reduce({0}, 100);
  sum[5] = std::nanf("");
  EXPECT_TRUE(verify_sum(sum.data(), sum.size(), ExpectedSum(1)));
}

TEST(Busbw, MatchesNcclTestsDefinition) {
  // 1 GB in 1 s on 8 ranks: algbw 1 GB/s, busbw 1.75 GB/s.
  EXPECT_DOUBLE_EQ(allreduce_busbw_gbps(1e9, 1.0, 8), 1.75);
  EXPECT_DOUBLE_EQ(allreduce_busbw_gbps(1e9, 1.0, 1), 0.0);
  EXPECT_EQ(allreduce_busbw_gbps(1e9, 0.0, 8), 0.0);
}

}  // namespace
}  // namespace gpudiag
