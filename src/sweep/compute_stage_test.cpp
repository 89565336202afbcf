// The sweep's compute verdicts from an exchange's table: a rank whose checksum
// is not its model's majority (or whose repetitions changed) fails, named with
// the finding; healthy pools fail nobody, on a busy machine too (skewed rates,
// more ranks than CPUs, the host backend); a slow GPU is a warning with its
// clocks, never a failure; ranks that failed earlier or ran no phase are left out.
#include "sweep/compute_stage.h"

#include <gtest/gtest.h>

namespace gpudiag::sweep {
namespace sweep_compute_test {

std::optional<RankRecord> ranked(int rank, const std::string& host, int local, double tflops,
                                 const std::string& bf16 = "aaaa", const std::string& device = "gpu",
                                 int cpus = 64) {
  RankRecord r;
  r.rank = rank;
  r.host = host;
  r.local_rank = local;
  r.host_cpus = cpus;
  auto& c = r.compute;
  c.model = device == "gpu" ? "NVIDIA H200" : "CPU Test";
  c.device = device;
  c.parts = {{"bf16 GEMM", bf16, 1e12, 0.01, 2}, {"fp32 GEMM", "ffff", 1e12, 0.01, 2}};
  c.tflops = tflops;
  c.seconds = 1.5;
  return r;
}

/// 4 nodes of 2 GPUs, rates skewed as a busy pool's are (330-412 TFLOP/s).
std::vector<std::optional<RankRecord>> pool() {
  std::vector<std::optional<RankRecord>> t;
  const double rates[] = {400, 388, 352, 341, 412, 330, 365, 399};
  for (int r = 0; r < 8; ++r) t.push_back(ranked(r, "node" + std::to_string(r / 2 + 1), r % 2, rates[r]));
  return t;
}

TEST(SweepCompute, AHealthyPoolFailsNobody) {
  const auto s = judge_compute_stage(pool());
  EXPECT_TRUE(s.failed.empty());
  EXPECT_TRUE(s.slow.empty());
  EXPECT_TRUE(s.rates_judged);
  EXPECT_NE(s.line.find("checksums identical on 8 ranks (NVIDIA H200"), std::string::npos) << s.line;
  EXPECT_EQ(s.line.find('\n'), std::string::npos);
}

TEST(SweepCompute, TheRankThatDiffersIsNamedAlone) {
  auto t = pool();
  t[5]->compute.parts[0].checksum = "bbbb";
  const auto s = judge_compute_stage(t);
  ASSERT_EQ(s.failed.size(), 1u);
  EXPECT_EQ(s.failed[0].first, 5);
  EXPECT_EQ(s.failed[0].second,
            "rank 5 [node3-1] failed in compute: compute result differs from 7 of 8 GPUs of its "
            "model (bf16 GEMM, checksum bbbb, theirs aaaa)");
  EXPECT_NE(s.line.find("; rank 5 differs"), std::string::npos) << s.line;
}

TEST(SweepCompute, AnUnstableRankFailsOnItsOwn) {
  auto t = pool();
  t[2]->compute.judged = "unstable";
  t[2]->compute.finding = "compute result changed between repetitions on this GPU (...)";
  const auto s = judge_compute_stage(t);
  ASSERT_EQ(s.failed.size(), 1u);
  EXPECT_EQ(s.failed[0].first, 2);
  EXPECT_NE(s.failed[0].second.find("changed between repetitions"), std::string::npos);
}

TEST(SweepCompute, ASlowGpuIsAWarningWithItsClocks) {
  auto t = pool();
  t[3]->compute.tflops = 150;
  t[3]->compute.clocks = {1005, 1980, 0x48, ""};
  const auto s = judge_compute_stage(t);
  EXPECT_TRUE(s.failed.empty());
  ASSERT_EQ(s.slow.size(), 1u);
  EXPECT_NE(s.slow[0].find("compute SLOW: rank 3 [node2-1]: 150.0 TFLOP/s, 39% of the median"),
            std::string::npos)
      << s.slow[0];
  EXPECT_NE(s.slow[0].find("SM clock 1005/1980 MHz, throttled: HW slowdown, HW thermal slowdown"),
            std::string::npos)
      << s.slow[0];
}

TEST(SweepCompute, RatesAreNotJudgedOnACrowdedHostOrTheHostBackend) {
  auto t = pool();
  for (auto& r : t) r->host_cpus = 1;  // 2 ranks on 1 CPU per node
  t[3]->compute.tflops = 10;
  auto s = judge_compute_stage(t);
  EXPECT_FALSE(s.rates_judged);
  EXPECT_TRUE(s.slow.empty());
  EXPECT_TRUE(s.failed.empty());
  EXPECT_NE(s.line.find("rate not judged (more ranks than CPUs on"), std::string::npos) << s.line;

  std::vector<std::optional<RankRecord>> host;
  for (int r = 0; r < 8; ++r)
    host.push_back(ranked(r, "node" + std::to_string(r / 2 + 1), r % 2, r == 4 ? 0.0005 : 0.01, "cccc", "host", 2));
  s = judge_compute_stage(host);
  EXPECT_FALSE(s.rates_judged);
  EXPECT_TRUE(s.slow.empty());
  EXPECT_TRUE(s.failed.empty());
  EXPECT_NE(s.line.find("rate not judged (host backend)"), std::string::npos) << s.line;
}

TEST(SweepCompute, RanksThatFailedEarlierOrRanNoPhaseAreLeftOut) {
  auto t = pool();
  t[1]->fail("device", "cudaMalloc failed", false);
  t[1]->compute.parts[0].checksum = "bbbb";
  t[6] = std::nullopt;  // never arrived
  t[7]->compute = {};   // --no-compute
  const auto s = judge_compute_stage(t);
  EXPECT_TRUE(s.failed.empty());
  EXPECT_NE(s.line.find("identical on 5 ranks"), std::string::npos) << s.line;
  std::vector<std::optional<RankRecord>> none(3);
  EXPECT_EQ(judge_compute_stage(none).line, "");
}

}  // namespace sweep_compute_test
}  // namespace gpudiag::sweep
