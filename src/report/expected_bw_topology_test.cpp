// The intra-node figure follows the topology NVML shows, not the GPU's name:
// an HGX H100 4-GPU board (6 NVLink 4 links a pair, no NVSwitch) and an HGX
// A100 4-GPU board (4 NVLink 3 links a pair) are judged by their own pair
// figures and have no all-reduce figure ("no figure for this topology"),
// where the name alone held them to the NVSwitch boards' 360 and 225 GB/s
// (a FAIL on `bench --links`, a WARN on the all-reduce). A board behind
// NVSwitches, or one whose topology is not known, keeps the family's figure.
#include <gtest/gtest.h>

#include "report/expected_bw.h"
#include "report/expected_bw_job.h"

namespace gpudiag {
namespace {

const std::string kNoIb = std::string(GPUDIAG_TEST_DATA) + "/sysfs/none";

/// One node of `n` GPUs, each joined to every other by `links` NVLinks
/// (-1: through NVSwitches; -2: NVML could not say).
CheckResult board_job(const std::string& gpu, int n, int links) {
  CheckResult res;
  res.me.backend = "nccl";
  auto bus = [](int g) { return "0000:" + std::to_string(10 + g) + ":00.0"; };
  for (int r = 0; r < n; ++r) {
    RankRecord rec;
    rec.rank = r;
    rec.host = "node0";
    rec.gpu_name = gpu;
    rec.backend = "nccl";
    rec.gpu_bus_id = bus(r);
    rec.gpu_uuid = "GPU-" + std::to_string(r);
    rec.link_bytes = 1 << 30;
    for (int p = 0; p < n && links >= 0; ++p)
      if (p != r)
        rec.nvlink_peers += (rec.nvlink_peers.empty() ? "" : ",") + bus(p) + "=" + std::to_string(links);
    if (links == -1) rec.nvlink_peers = "switch:18";
    res.table.push_back(rec);
  }
  return res;
}

BwVerdict pair_verdict(const CheckResult& res, double gbps) {
  LinkVerdict links;
  links.links = {{0, 1, gbps, true, false}};
  auto v = link_bw_verdicts(res, links, std::nullopt, kNoIb);
  return v.empty() ? BwVerdict{} : v[0];
}

TEST(ExpectedBwTopology, AnH100FourGpuMeshIsJudgedByItsPairs) {
  const auto res = board_job("NVIDIA H100 80GB HBM3", 4, 6);
  const auto link = pair_verdict(res, 130);
  EXPECT_EQ(link.verdict, "PASS") << link.text;
  EXPECT_EQ(link.expected_gbps, 120);
  EXPECT_NE(link.text.find("6 NVLinks a pair, no NVSwitch"), std::string::npos) << link.text;
  const auto all = sweep_busbw_verdict(res, 1 << 30, 223, std::nullopt, kNoIb);
  EXPECT_EQ(all.verdict, "none") << all.text;
  EXPECT_NE(all.text.find("no figure for H100 SXM on this topology"), std::string::npos) << all.text;
  EXPECT_FALSE(all.failed());
}

TEST(ExpectedBwTopology, AnA100FourGpuMeshIsJudgedByItsPairs) {
  const auto link = pair_verdict(board_job("NVIDIA A100-SXM4-80GB", 4, 4), 90);
  EXPECT_EQ(link.verdict, "PASS") << link.text;
  EXPECT_EQ(link.expected_gbps, 80);
}

TEST(ExpectedBwTopology, ALinkDownOnAMeshIsJudgedByTheBoardsFigure) {
  auto res = board_job("NVIDIA H100 80GB HBM3", 4, 6);
  res.table[1]->nvlink_peers = "0000:10:00.0=5,0000:12:00.0=6,0000:13:00.0=6";
  const auto link = pair_verdict(res, 50);
  EXPECT_EQ(link.expected_gbps, 120);
  EXPECT_EQ(link.verdict, "FAIL") << link.text;
  EXPECT_NE(link.text.find("5 NVLinks a pair"), std::string::npos) << link.text;
}

TEST(ExpectedBwTopology, NvSwitchesOrAnUnknownTopologyKeepTheFamilysFigure) {
  for (int links : {-1, -2}) {
    const auto res = board_job("NVIDIA H100 80GB HBM3", 8, links);
    EXPECT_EQ(pair_verdict(res, 350).expected_gbps, 360) << links;
    EXPECT_EQ(sweep_busbw_verdict(res, 1 << 30, 350, std::nullopt, kNoIb).expected_gbps, 360);
  }
}

TEST(ExpectedBwTopology, EveryNvSwitchFamilySaysSo) {
  for (const auto& f : expected_bw_table())
    if (f.file.find("pcie") == std::string::npos) EXPECT_TRUE(f.intra_needs_switch) << f.file;
}

// Across nodes a port DOWN on rank 0's host does not lower the bar: two
// 200G ports, one down, hold two nodes to two ports' figure, and say so.
TEST(ExpectedBwTopology, APortDownIsAFindingNotALowerBar) {
  CheckResult res;
  res.me.backend = "nccl";
  for (int r = 0; r < 4; ++r) {
    RankRecord rec;
    rec.rank = r;
    rec.host = "node" + std::to_string(r / 2);
    rec.gpu_name = "NVIDIA A100-SXM4-80GB";
    rec.backend = "nccl";
    rec.gpu_uuid = "GPU-" + std::to_string(r);
    res.table.push_back(rec);
  }
  const auto v = sweep_busbw_verdict(res, 1 << 30, 30, std::nullopt,
                                     std::string(GPUDIAG_TEST_DATA) + "/sysfs/ib_down", "");
  EXPECT_EQ(v.expected_gbps, 48) << v.text;  // 2 x 24 GB/s per 200G NIC
  EXPECT_EQ(v.verdict, "WARN") << v.text;
  EXPECT_NE(v.text.find("2x 200 Gb/s NICs a node; 1 of them DOWN"), std::string::npos) << v.text;
}

}  // namespace
}  // namespace gpudiag
