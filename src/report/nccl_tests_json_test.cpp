// nccl-tests' per-iteration statistics as gpudiag's -J writes them
// (nccl_tests_json.h per_iter_json): the same nearest-rank percentiles as
// nccl-tests 2.19's util.cu (percentileIndex: min(n-1, (n*p+99)/100-1)),
// checked at 20 iterations, where an index one off reads the maximum as p95.
#include "report/nccl_tests_json.h"

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

TEST(NcclTestsJson, PercentilesAreNcclTestsNearestRankAtTwentyIterations) {
  std::vector<float> t;
  for (int i = 20; i >= 1; --i) t.push_back(static_cast<float>(i));  // 20 samples, 1..20 us
  const auto j = per_iter_json({t}, 0);
  EXPECT_EQ(j["min_us"].get<double>(), 1);
  EXPECT_EQ(j["max_us"].get<double>(), 20);
  EXPECT_EQ(j["p50_us"].get<double>(), 11);  // sorted[n/2]
  EXPECT_EQ(j["p95_us"].get<double>(), 19);  // index (1900+99)/100-1 = 18: not the maximum
  EXPECT_EQ(j["p99_us"].get<double>(), 20);  // index 19
  // 100 samples: p95 and p99 are the 95th and 99th.
  std::vector<float> h;
  for (int i = 1; i <= 100; ++i) h.push_back(static_cast<float>(i));
  const auto k = per_iter_json({h}, 0);
  EXPECT_EQ(k["p95_us"].get<double>(), 95);
  EXPECT_EQ(k["p99_us"].get<double>(), 99);
  // The first K skipped (-K) before the statistics.
  const auto s = per_iter_json({t}, 10);
  EXPECT_EQ(s["skipped_iterations"].get<int>(), 10);
  EXPECT_EQ(s["max_us"].get<double>(), 10);
}

}  // namespace
}  // namespace gpudiag
