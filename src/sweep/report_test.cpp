// The sweep's outputs in the order people read hosts: node2 before node10,
// whatever order the nodes arrived in (the judge numbers them by rank); an OK
// node whose figure is below its threshold column says why.
#include "sweep/report.h"

#include <gtest/gtest.h>

namespace gpudiag::sweep {
namespace {

SweepOutcome arrived_out_of_order() {
  SweepOutcome o;
  o.hosts = {"node10", "node2", "node1", "gpu-a09"};
  o.ranks_per_node = {8, 8, 8, 8};
  for (int k = 0; k < 4; ++k) o.verdicts.push_back({k, NodeState::ok, std::nullopt, 0, ""});
  o.verdicts[2].state = NodeState::missing;
  o.verdicts[2].reason = "never arrived";
  return o;
}

TEST(SweepReport, RowsAndHostFilesAreInHostOrder) {
  const auto o = arrived_out_of_order();
  EXPECT_EQ(good_hostfile_text(o, false), "gpu-a09\nnode2\nnode10\n");
  EXPECT_EQ(good_hostfile_text(o, true), "gpu-a09 slots=8\nnode2 slots=8\nnode10 slots=8\n");
  const std::string text = sweep_text(o);
  const auto a = text.find("\ngpu-a09 "), n1 = text.find("\nnode1 "), n2 = text.find("\nnode2 "),
             n10 = text.find("\nnode10 ");
  ASSERT_NE(n10, std::string::npos) << text;
  EXPECT_LT(a, n1);
  EXPECT_LT(n1, n2);
  EXPECT_LT(n2, n10);
  const auto j = sweep_json(o);
  EXPECT_EQ(j["nodes"][0]["host"], "gpu-a09");
  EXPECT_EQ(j["nodes"][3]["host"], "node10");
}

TEST(SweepReport, APoolOfOneNodeSaysNoPairTestRan) {
  SweepOutcome o;
  o.hosts = {"node1"};
  o.ranks_per_node = {2};
  o.backend = "host/tcp";
  o.verdicts.push_back({0, NodeState::ok, std::nullopt, 0, ""});
  const std::string text = sweep_text(o);
  EXPECT_NE(text.find("no pair test ran: one node has no partner node to pair with, and the host "
                      "backend pairs no ranks within a node\n"),
            std::string::npos)
      << text;
  o.rounds.push_back({1, "node pairs", 1, 0.5});
  o.hosts.push_back("node2");
  EXPECT_EQ(sweep_text(o).find("no pair test ran"), std::string::npos);
}

NodeTest cross(int partner, double gbps, bool failed = false) {
  NodeTest t;
  t.round = 2;
  t.stage = "node pairs";
  t.partner = partner;
  t.gbps = gbps;
  t.failed = failed;
  t.where = "ranks 0<->4";
  return t;
}

TEST(SweepReport, AnOkNodeBelowItsThresholdSaysWhy) {
  SweepOutcome o;
  o.hosts = {"node1", "node2", "node3", "node4"};
  o.ranks_per_node = {1, 1, 1, 1};
  // node1: its weakest test is with node2, found slow; node3: one slow test
  // of a node fast at its median; node4: above its threshold, nothing to say.
  o.verdicts.push_back({0, NodeState::ok, cross(1, 0.01), 0.23, ""});
  o.verdicts.push_back({1, NodeState::slow, cross(0, 0.01), 0.23, ""});
  o.verdicts.push_back({2, NodeState::ok, cross(3, 0.10), 0.23, ""});
  o.verdicts.push_back({3, NodeState::ok, cross(2, 0.39), 0.23, ""});
  o.rounds.push_back({2, "node pairs", 2, 0.5});
  const std::string text = sweep_text(o);
  EXPECT_NE(text.find("node1     OK       node pairs (round 2)           0.01 GB/s     0.23 GB/s  node2     "
                      "ranks 0<->4\n    OK: below the threshold with node2, found SLOW: the test "
                      "speaks against it, not this node\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ranks 0<->4\n    OK: below the threshold in this test only"), std::string::npos)
      << text;
  // Every OK row whose figure is below its threshold column is followed by why.
  EXPECT_EQ(text.find("node4     OK       node pairs (round 2)           0.39 GB/s     0.23 GB/s  node3     "
                      "ranks 0<->4\nexclude"),
            text.find("node4     OK")) << text;
  const auto j = sweep_json(o);
  EXPECT_EQ(j["nodes"][3]["test"]["ok_below_threshold"], "");
  EXPECT_NE(j["nodes"][0]["test"]["ok_below_threshold"], "");
}

}  // namespace
}  // namespace gpudiag::sweep
