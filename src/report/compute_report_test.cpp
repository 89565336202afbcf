// Rank 0's report of the compute phase: GPUs whose rates differ as healthy
// GPUs' do give no finding, a throttled one is SLOW (a warning, in the JSON
// and the metrics' verdict), the host backend's and an oversubscribed node's
// rates are reported and never judged, and each rank's JSON object says
// whether it agrees.
#include "report/compute_report.h"

#include <gtest/gtest.h>

namespace gpudiag::compute_report_test {
namespace {

CheckResult gpus(const std::vector<double>& tflops, const std::string& device = "gpu", int cpus = 64) {
  CheckResult res;
  const int n = static_cast<int>(tflops.size());
  res.table.resize(n);
  for (int r = 0; r < n; ++r) {
    RankRecord rec;
    rec.rank = r;
    rec.world_size = n;
    rec.local_rank = r;
    rec.host = "node" + std::to_string(r / 8);
    rec.host_cpus = cpus;
    rec.compute.model = device == "gpu" ? "NVIDIA H200" : "CPU Test";
    rec.compute.device = device;
    rec.compute.parts = {{"bf16 GEMM", "aa", 1, 1, 2}, {"fp16 GEMM", "bb", 1, 1, 2}, {"fp32 GEMM", "cc", 1, 1, 2}};
    rec.compute.tflops = tflops[r];
    rec.compute.seconds = 1.5;
    rec.compute.judged = "agrees";
    res.table[r] = rec;
  }
  res.me = *res.table[0];
  return res;
}

TEST(ComputeReport, HealthySkewedGpusAreNotSlowAThrottledOneIs) {
  auto res = gpus({410, 395, 371, 402, 360, 388, 415, 349, 400, 392, 380, 405, 366, 399, 377, 401});
  auto rep = compute_report(res);
  EXPECT_TRUE(rep.rates_judged);
  EXPECT_TRUE(rep.slow.empty());
  EXPECT_EQ(rep.line,
            "compute: bf16, fp16 and fp32 GEMM checksums identical on 16 ranks (NVIDIA H200, median 393.5 "
            "TFLOP/s), 1.50 s\n");
  res.table[9]->compute.tflops = 180;  // clock-capped
  rep = compute_report(res);
  ASSERT_EQ(rep.slow.size(), 1u);
  EXPECT_EQ(rep.slow.begin()->first, 9);
  EXPECT_NE(rep.text().find("warning: compute SLOW: rank 9 [node1-9]: 180.0 TFLOP/s, 45% of the median"),
            std::string::npos)
      << rep.text();
  const auto j = compute_json(*res.table[9], rep);
  EXPECT_EQ(j["verdict"], "slow");
  EXPECT_EQ(j["agrees"], true);  // slow is not wrong: a warning, the rank stays OK
  EXPECT_EQ(j["checksum"], "aa/bb/cc");
  EXPECT_EQ(compute_json(*res.table[0], rep)["verdict"], "ok");
}

TEST(ComputeReport, TheHostsAndACrowdedNodesRatesAreNeverJudged) {
  auto host = gpus({0.01, 0.002, 0.01, 0.01}, "host");
  auto rep = compute_report(host);
  EXPECT_FALSE(rep.rates_judged);
  EXPECT_TRUE(rep.slow.empty());
  EXPECT_NE(rep.line.find("; rate not judged (host backend)"), std::string::npos);
  auto crowded = gpus({400, 100, 400, 400}, "gpu", 2);  // 4 ranks on 2 CPUs
  rep = compute_report(crowded);
  EXPECT_FALSE(rep.rates_judged);
  EXPECT_TRUE(rep.slow.empty());
  EXPECT_NE(rep.line.find("rate not judged (more ranks than CPUs on node0: 4 ranks on 2 CPUs)"),
            std::string::npos)
      << rep.line;
}

TEST(ComputeReport, EachRanksObject) {
  auto res = gpus({400, 400, 400});
  res.table[1]->compute.judged = "differs";
  res.table[1]->compute.finding = "compute result differs from 2 of 3 GPUs of its model";
  res.table[2]->compute = {};  // --no-compute, or failed before the phase
  const auto rep = compute_report(res);
  const auto bad = compute_json(*res.table[1], rep);
  EXPECT_EQ(bad["agrees"], false);
  EXPECT_EQ(bad["verdict"], "differs");
  EXPECT_EQ(bad["finding"], "compute result differs from 2 of 3 GPUs of its model");
  const auto none = compute_json(*res.table[2], rep);
  EXPECT_TRUE(none["agrees"].is_null());
  EXPECT_EQ(none["verdict"], "not run");
  EXPECT_NE(rep.line.find("identical on 1 of 2 ranks"), std::string::npos) << rep.line;
}

TEST(ComputeReport, AGpusClocksTravelAndTheHostsAreLeftOut) {
  auto res = gpus({400, 400, 400});
  res.table[0]->compute.clocks = {1005, 1980, 0x8, ""};
  // Through a record's wire, as rank 0 reads a peer's.
  const auto back = decode(encode(*res.table[0])).compute.clocks;
  EXPECT_EQ(back.sm_mhz, 1005);
  EXPECT_EQ(back.sm_max_mhz, 1980);
  EXPECT_EQ(back.events, 0x8);
  const auto rep = compute_report(res);
  EXPECT_EQ(compute_json(*res.table[0], rep)["clocks"]["sm_mhz"], 1005);
  // A peer's figures out of range are unknown, never quoted.
  auto wild = nlohmann::json::parse(encode(*res.table[1]));
  wild["compute"]["clocks"] = {{"sm_mhz", 1 << 30}, {"sm_max_mhz", -7}, {"events", -9}, {"why", "x"}};
  const auto tamed = decode(wild.dump()).compute.clocks;
  EXPECT_EQ(tamed.sm_mhz, -1);
  EXPECT_EQ(tamed.sm_max_mhz, -1);
  EXPECT_EQ(tamed.events, -1);
  auto host = gpus({0.01, 0.01}, "host");
  EXPECT_EQ(encode(*host.table[0]).find("clocks"), std::string::npos);
  EXPECT_FALSE(compute_json(*host.table[0], compute_report(host)).contains("clocks"));
}

}  // namespace
}  // namespace gpudiag::compute_report_test
