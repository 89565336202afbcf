// The MPI tree's shape and its judges' decisions, in one process (the MPI
// runs are tests/integration/test_mpi_groups.py): groups and their judges
// from the leaders MPI names, a silent leader named by its judge, a silent
// judge costing its own node only, a node counted once when it came both
// ways, and the check's own tree review (checks/tree_review.h) merging a
// failure from another group.
#include "plane/mpi_tree_judge.h"

#include <gtest/gtest.h>

#include "checks/record.h"
#include "checks/tree_review.h"
#include "checks/verdict.h"
#include "plane/checkpoint_digest.h"

namespace gpudiag {
namespace {

/// 8 ranks in nodes of 2, groups of 2 nodes: judges 0 (ranks 0-3) and 4 (4-7).
MpiTreeShape eight_in_pairs() {
  std::vector<int> leaders;
  for (int r = 0; r < 8; ++r) leaders.push_back(r - r % 2);
  return MpiTreeShape::from_leaders(leaders, 2);
}

std::string record_of(int rank, bool ok = true) {
  RankRecord r;
  r.rank = rank;
  r.world_size = 8;
  r.host = "n" + std::to_string(rank / 2);
  if (!ok) r.fail("all-reduce", "boom on rank " + std::to_string(rank));
  return encode(r);
}

NodeBundle bundle_of(const MpiTreeShape& s, int k, const std::vector<int>& absent = {},
                     int failing = -1) {
  TreePart p;
  p.checkpoint = "all-reduce";
  for (int r : s.nodes[k])
    if (std::find(absent.begin(), absent.end(), r) == absent.end())
      p.records[r] = record_of(r, r != failing);
    else
      p.missing.push_back(r), p.notes[r] = "did not reach its node's leader";
  Needs needs;
  for (int r : s.nodes[k]) needs[r] = {0};
  auto b = decode_bundle(encode_bundle(p, needs), s, k);
  EXPECT_TRUE(b.has_value());
  return *b;
}

TEST(MpiTreeShape, GroupsOfNodesJudgedByTheirFirstLeader) {
  auto s = eight_in_pairs();
  EXPECT_EQ(s.node_count(), 4);
  EXPECT_TRUE(s.grouped());
  EXPECT_EQ(s.groups(), 2);
  EXPECT_EQ(s.judge(0), 0);
  EXPECT_EQ(s.judge(1), 4);
  EXPECT_EQ(s.group_of_rank(7), 1);
  EXPECT_EQ(s.node_label(3), "node 3 (ranks 6-7)");
  EXPECT_EQ(s.group_label(1), "group 1 (nodes 2-3, ranks 4-7)");
  // Up to group_nodes nodes: one group, rank 0 judges them all.
  auto flat = MpiTreeShape::from_leaders({0, 0, 2, 2}, 2);
  EXPECT_FALSE(flat.grouped());
  EXPECT_EQ(flat.groups(), 1);
}

TEST(MpiTreeShape, NodesThatAreNotBlocksOfRanks) {
  // --map-by node: ranks 0,2,4 on one host, 1,3,5 on the other.
  auto s = MpiTreeShape::from_leaders({0, 1, 0, 1, 0, 1}, 128);
  ASSERT_EQ(s.node_count(), 2);
  EXPECT_EQ(s.nodes[1], (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(s.node_label(1), "node 1 (ranks 1,3,5)");
  // A leader that does not lead itself is not believed: that rank is a node.
  auto odd = MpiTreeShape::from_leaders({0, 2, 0}, 128);
  EXPECT_EQ(odd.node_count(), 2);
}

TEST(MpiTreeJudge, ABundleSpeaksOnlyForItsNode) {
  auto s = eight_in_pairs();
  TreePart p;
  p.records[2] = record_of(2);
  p.records[3] = record_of(3);
  p.records[4] = record_of(4);  // another node's
  auto b = decode_bundle(encode_bundle(p, {{3, {0, 1}}, {5, {0}}}), s, 1);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->part.records.size(), 2u);
  EXPECT_EQ(b->needs.size(), 1u);
  EXPECT_EQ(b->needs.at(3), (std::vector<int>{0, 1}));
  EXPECT_FALSE(decode_bundle("not a bundle", s, 1));
}

TEST(MpiTreeJudge, ASilentLeaderIsNamedWithItsNodesRanks) {
  auto s = eight_in_pairs();
  LevelTable t;
  auto b2 = bundle_of(s, 2);
  t.add_node(s, 2, &b2);
  t.add_node(s, 3, nullptr);
  t.finish();
  EXPECT_EQ(t.missing, (std::vector<int>{6, 7}));
  EXPECT_EQ(t.notes.at(6), "node 3 (ranks 6-7): its leader (rank 6) did not report");
  EXPECT_EQ(t.lost, std::vector<int>{3});
  // The report carries the group's review and who it lost, not the records.
  auto report = decode_group_report(encode_group_report(t, "review", s, 1), s, 1);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->part.missing, (std::vector<int>{6, 7}));
  EXPECT_EQ(report->part.lost, std::vector<int>{3});
  EXPECT_TRUE(report->part.records.empty());
  EXPECT_EQ(report->part.review, "review");
  EXPECT_EQ(report->needs, std::vector<int>{0});  // rank 0's record, from outside
  EXPECT_FALSE(decode_group_report(encode_group_report(t, "review", s, 1), s, 0));
}

TEST(MpiTreeJudge, ASilentJudgeCostsItsOwnNodeOnly) {
  auto s = eight_in_pairs();
  RootHeard h;
  h.checkpoint = "all-reduce";
  h.nodes[0] = bundle_of(s, 0);
  h.nodes[1] = bundle_of(s, 1);
  h.nodes[3] = bundle_of(s, 3);  // came to rank 0: its judge (rank 4) is silent
  CheckTreeReviewer reviewer;
  auto v = judge_root(s, h, &reviewer);
  EXPECT_EQ(v.missing, (std::vector<int>{4, 5}));
  EXPECT_EQ(v.notes.at(4),
            "node 2 (ranks 4-5): its leader (rank 4), the judge of group 1 (nodes 2-3, ranks "
            "4-7), did not report");
  EXPECT_EQ(v.direct.records.count(7), 1u);
}

TEST(MpiTreeJudge, ANodeHeardBothWaysCountsOnceAndFailuresMergeAcrossGroups) {
  auto s = eight_in_pairs();
  CheckTreeReviewer group_reviewer, root_reviewer;
  // Group 1's judge heard both its nodes; rank 7 failed.
  LevelTable t;
  auto b2 = bundle_of(s, 2), b3 = bundle_of(s, 3, {}, 7);
  t.add_node(s, 2, &b2);
  t.add_node(s, 3, &b3);
  t.finish();
  const std::string review = group_reviewer.review(t.checkpoint, t.records, t.missing, t.notes);
  RootHeard h;
  h.checkpoint = "all-reduce";
  h.nodes[0] = bundle_of(s, 0);
  h.nodes[1] = bundle_of(s, 1, {3});
  h.nodes[3] = b3;  // also came direct, too late for its judge's ack
  h.groups[1] = *decode_group_report(encode_group_report(t, review, s, 1), s, 1);
  auto v = judge_root(s, h, &root_reviewer);
  EXPECT_EQ(v.missing, std::vector<int>{3});
  EXPECT_EQ(v.direct.records.count(7), 0u);  // judged by its group, not again here
  auto merged = decode_review(v.review);
  EXPECT_EQ(merged.failed, 1);
  ASSERT_EQ(merged.failures.size(), 1u);
  EXPECT_EQ(merged.failures[0].first, 7);
  EXPECT_NE(merged.failures[0].second.find("boom on rank 7"), std::string::npos);
}

TEST(MpiTreeJudge, TheDigestGoesDownWithTheRecordsAsked) {
  auto s = eight_in_pairs();
  const std::string digest = encode_digest({5}, {{5, "gone"}}, std::nullopt, "the review", {});
  auto down = decode_down(encode_down({digest, {4, 6}, {{0, record_of(0)}}}), 8);
  ASSERT_TRUE(down);
  EXPECT_EQ(down->send, (std::vector<int>{4, 6}));
  EXPECT_EQ(down->records.at(0), record_of(0));
  Gathered g;
  g.records.resize(8);
  g.notes.resize(8);
  ASSERT_TRUE(decode_digest(down->digest, 6, 8, g));
  EXPECT_EQ(g.missing, std::vector<int>{5});
  EXPECT_EQ(g.review, "the review");
  EXPECT_FALSE(decode_down("one line only", 8));
  Needs needs{{6, {0, 3}}, {7, {1}}};
  auto picked = records_for({{0, "a"}, {1, "b"}, {3, "c"}}, needs, {6});
  EXPECT_EQ(picked.size(), 2u);
  EXPECT_EQ(picked.count(1), 0u);
}

}  // namespace
}  // namespace gpudiag
