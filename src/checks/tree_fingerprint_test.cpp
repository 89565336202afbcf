// The verdict across a tree's groups (tree_fingerprint.h), through the
// check's reviewer as the judges run it: each group reviews its table at the
// exchange, the root merges the reviews. A difference between whole groups is
// found and named as a flat job names it, a node that drifts is named by host,
// a broken one stops the job, and a group's summary that cannot be believed
// leaves that group compared within itself only.
#include "checks/tree_fingerprint.h"

#include <gtest/gtest.h>

#include <functional>

#include "checks/record.h"
#include "checks/tree_review.h"
#include "checks/verdict.h"
#include "world/fingerprint_compare.h"

namespace gpudiag {
namespace {

constexpr int kWorld = 64, kGroup = 16;  // 4 groups of 2 nodes of 8

std::map<int, std::string> records(int first, int n,
                                   const std::function<void(int, Fingerprint&)>& f = {}) {
  std::map<int, std::string> out;
  for (int r = first; r < first + n; ++r) {
    RankRecord rec;
    rec.rank = r;
    rec.world_size = kWorld;
    rec.host = "simnode" + std::to_string(r / 8);
    rec.local_rank = r % 8;
    rec.fingerprint.fields = {{"kernel", "6.1.0"},
                              {"gpu.driver", "535.104.05"},
                              {"nccl.version", "2.21.5"},
                              {"env.NCCL_SOCKET_IFNAME", "eth0"}};
    if (f) f(r, rec.fingerprint);
    out[r] = encode(rec);
  }
  return out;
}

/// Every group's exchange review, merged at the root.
CheckpointReview job(const std::function<void(int, Fingerprint&)>& f = {},
                     const std::function<void(int, std::string&)>& tamper = {}) {
  std::vector<ChildReview> reviews;
  for (int g = 0; g < kWorld / kGroup; ++g) {
    CheckTreeReviewer judge;
    std::string text = judge.review("exchange", records(g * kGroup, kGroup, f), {}, {});
    if (tamper) tamper(g, text);
    reviews.push_back({text, g * kGroup, g * kGroup + kGroup - 1});
  }
  CheckTreeReviewer root;
  return decode_review(root.merge("exchange", reviews));
}

TEST(TreeFingerprint, UniformGroupsAgreeAcrossTheJob) {
  const auto r = job();
  EXPECT_TRUE(r.fingerprint_summary.is_null());  // not in the digest
  EXPECT_EQ(render_fingerprint(r.fingerprint),
            "fingerprint: 4 fields agree on all 64 ranks (compared across all 4 groups of "
            "nodes)\n");
}

TEST(TreeFingerprint, AWholeGroupOnAnotherSettingIsFound) {
  const auto r = job([](int rank, Fingerprint& f) {
    if (rank >= 32 && rank < 48) f.fields["env.NCCL_SOCKET_IFNAME"] = "ib0";
  });
  const auto text = render_fingerprint(r.fingerprint);
  EXPECT_NE(text.find("fingerprint: 1 of 4 fields differ between the 64 ranks (compared across "
                      "all 4 groups of nodes)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  warning: NCCL_SOCKET_IFNAME differs between ranks: ranks 0-31,48-63 "
                      "[simnode0,simnode1,simnode2 +3 hosts]: NCCL_SOCKET_IFNAME=eth0; ranks "
                      "32-47 [simnode4,simnode5]: NCCL_SOCKET_IFNAME=ib0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\ndrift: simnode4,simnode5 (ranks 32-47): NCCL_SOCKET_IFNAME is ib0, not "
                      "eth0 as on 48 other ranks\n"),
            std::string::npos)
      << text;
  EXPECT_TRUE(r.conflicts.empty());  // a warning: the job goes on
}

// Three levels: groups 0-1 under supergroup 0, groups 2-3 under supergroup
// 1, each supergroup merging its groups for the root (merge_up). A whole
// supergroup on another setting agrees within itself: only the root,
// comparing the supergroups' merged summaries, can find it.
TEST(TreeFingerprint, AWholeSupergroupOnAnotherSettingIsFoundAtTheRoot) {
  auto on_ib = [](int rank, Fingerprint& f) {
    if (rank >= 32) f.fields["env.NCCL_SOCKET_IFNAME"] = "ib0";
  };
  std::vector<ChildReview> supergroups;
  for (int s = 0; s < 2; ++s) {
    std::vector<ChildReview> groups;
    for (int g = 2 * s; g < 2 * s + 2; ++g) {
      CheckTreeReviewer judge;
      groups.push_back({judge.review("exchange", records(g * kGroup, kGroup, on_ib), {}, {}),
                        g * kGroup, g * kGroup + kGroup - 1});
    }
    CheckTreeReviewer judge;
    const std::string merged = judge.merge_up("exchange", groups);
    EXPECT_EQ(render_fingerprint(decode_review(merged).fingerprint).find("differ"),
              std::string::npos);  // uniform within each supergroup
    supergroups.push_back({merged, 32 * s, 32 * s + 31});
  }
  CheckTreeReviewer root;
  const auto text = render_fingerprint(decode_review(root.merge("exchange", supergroups)).fingerprint);
  EXPECT_NE(text.find("fingerprint: 1 of 4 fields differ between the 64 ranks (compared "
                      "across all 4 groups of nodes)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ranks 0-31 [simnode0,simnode1,simnode2 +1 hosts]: NCCL_SOCKET_IFNAME=eth0; "
                      "ranks 32-63 [simnode4,simnode5,simnode6 +1 hosts]: NCCL_SOCKET_IFNAME=ib0"),
            std::string::npos)
      << text;
}

TEST(TreeFingerprint, ANodeOnAnotherDriverIsNamedAsDrift) {
  const auto r = job([](int rank, Fingerprint& f) {
    if (rank / 8 == 5) f.fields["gpu.driver"] = "550.54.15";
  });
  const auto text = render_fingerprint(r.fingerprint);
  EXPECT_NE(text.find("\ndrift: simnode5 (ranks 40-47): the GPU driver is 550.54.15, not "
                      "535.104.05 as on 56 other ranks\n"),
            std::string::npos)
      << text;
}

TEST(TreeFingerprint, BrokenAcrossGroupsOnlyStopsTheJob) {
  const auto r = job([](int rank, Fingerprint& f) {
    if (rank >= 48) f.fields["nccl.version"] = "2.18.1";
  });
  ASSERT_EQ(r.conflicts.size(), 1u);
  EXPECT_EQ(r.conflicts[0].rfind("the NCCL version differs between ranks: ranks 0-47 "
                                 "[simnode0,simnode1,simnode2 +3 hosts]: 2.21.5; ranks 48-63 "
                                 "[simnode6,simnode7]: 2.18.1 (install one NCCL version",
                                 0),
            0u)
      << r.conflicts[0];
  EXPECT_NE(render_fingerprint(r.fingerprint).find("BROKEN: the NCCL version differs"),
            std::string::npos);
  // Broken inside a group too: that group already said so, once.
  const auto inside = job([](int rank, Fingerprint& f) {
    if (rank >= 56) f.fields["nccl.version"] = "2.18.1";
  });
  ASSERT_EQ(inside.conflicts.size(), 1u);
  EXPECT_NE(inside.conflicts[0].find("ranks 48-55 [simnode6]: 2.21.5; ranks 56-63 [simnode7]"),
            std::string::npos)
      << inside.conflicts[0];
}

TEST(TreeFingerprint, ASummaryThatCannotBeBelievedLeavesItsGroupWithin) {
  // Group 2 claims ranks of group 0 in its summary: refused, its own
  // comparison stands (and the difference it holds inside is still named).
  const auto r = job(
      [](int rank, Fingerprint& f) {
        if (rank == 33) f.fields["env.NCCL_SOCKET_IFNAME"] = "lo";
      },
      [](int g, std::string& text) {
        if (g != 2) return;
        auto j = nlohmann::json::parse(text);
        j["fingerprint_summary"]["ranks"] = {{0, 47}};
        text = j.dump();
      });
  const auto text = render_fingerprint(r.fingerprint);
  EXPECT_NE(text.find("(compared across 3 groups of nodes; 1 more compared only within "
                      "themselves: no summary read)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 33 [simnode4]: NCCL_SOCKET_IFNAME=lo"), std::string::npos) << text;
  EXPECT_EQ(r.fingerprint.value("ranks_compared", 0), 64);
}

TEST(TreeFingerprint, AGroupWithTheLargestFingerprintsStillFitsItsPart) {
  // Every rank at the fingerprint's field cap, every value long and its own
  // node's: the group's review (comparison and summary) stays within what a
  // part carries, and the root still reads it.
  auto huge = [](int rank, Fingerprint& f) {
    for (std::size_t k = f.fields.size(); k < kMaxFields; ++k)
      f.fields["env.NCCL_X" + std::to_string(k)] =
          std::string(kMaxValueChars - 8, 'v') + std::to_string(rank / 8);
  };
  std::vector<std::string> texts;
  for (int g = 0; g < 2; ++g) {
    CheckTreeReviewer judge;
    texts.push_back(judge.review("exchange", records(g * 32, 32, huge), {}, {}));
    EXPECT_LT(texts.back().size(), kMaxPartReview);
  }
  CheckTreeReviewer root;
  const auto r = decode_review(root.merge("exchange", {{texts[0], 0, 31}, {texts[1], 32, 63}}));
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.fingerprint.value("across_groups", 0), 2) << r.fingerprint.dump().substr(0, 500);
  EXPECT_GT(r.fingerprint.value("more_differences", 0), 10);
}

TEST(TreeFingerprint, AtOtherCheckpointsThereIsNothingToCompare) {
  CheckTreeReviewer judge, root;
  const auto a = judge.review("barrier", records(0, 16), {}, {});
  const auto b = judge.review("barrier", records(16, 16), {}, {});
  const auto r = decode_review(root.merge("barrier", {{a, 0, 15}, {b, 16, 31}}));
  EXPECT_TRUE(r.fingerprint.is_null());
  EXPECT_TRUE(merge_group_prints({}).fingerprint.is_null());
}

TEST(TreeFingerprint, OnePartIsPassedOnWithoutItsSummary) {
  CheckTreeReviewer judge, root;
  const auto a = judge.review("exchange", records(0, 16), {}, {});
  EXPECT_FALSE(decode_review(a).fingerprint_summary.is_null());
  const auto r = decode_review(root.merge("exchange", {{a, 0, 63}}));
  EXPECT_TRUE(r.fingerprint_summary.is_null());
  EXPECT_EQ(render_fingerprint(r.fingerprint), "fingerprint: 4 fields agree on all 16 ranks\n");
}

}  // namespace
}  // namespace gpudiag
