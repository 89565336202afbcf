// The bootstrap roots' plan and NCCL's split of ranks between them
// (nccl_roots.h): the split as NCCL's src/bootstrap.cc computes it and its
// guide's examples, the plan for each setting, size and NCCL, and
// GPUDIAG_NCCL_ROOTS as a user may set it.
#include "comm/nccl_roots.h"

#include <gtest/gtest.h>

#include <vector>

#include "util/error.h"

namespace gpudiag {
namespace {

std::vector<int> makers(int nranks, int nroots) {
  std::vector<int> out;
  for (int r = 0; r < nranks; ++r)
    if (nccl_root_made_by(r, nranks, nroots) >= 0) out.push_back(r);
  return out;
}

// NCCL's guide (usage/communicators, "rankHasRoot"): 3 ids over 7 ranks are
// made by ranks 0, 3 and 5 (blocks 0-2, 3-4, 5-6); its design note: 5 roots
// over 17 ranks take 4 4 3 3 3, made by 0, 4, 8, 11, 14.
TEST(NcclRoots, MakersAreTheGuidesExamples) {
  EXPECT_EQ(makers(7, 3), (std::vector<int>{0, 3, 5}));
  EXPECT_EQ(makers(17, 5), (std::vector<int>{0, 4, 8, 11, 14}));
  EXPECT_EQ(nccl_root_made_by(5, 7, 3), 2);
  EXPECT_EQ(nccl_root_made_by(4, 7, 3), -1);
  EXPECT_EQ(makers(8, 1), (std::vector<int>{0}));
  EXPECT_EQ(makers(4, 4), (std::vector<int>{0, 1, 2, 3}));
}

// src/bootstrap.cc: every rank checks in with exactly one root, whose block
// of consecutive ranks starts at firstRankFromRoot and holds nRankFromRoot
// ranks; the first nranks % nroots roots take one rank more.
TEST(NcclRoots, EveryRankHasOneRootInConsecutiveBlocks) {
  for (int n : {1, 2, 3, 7, 8, 17, 100, 2049, 100000})
    for (int k : {1, 2, 3, 5, 49, 64}) {
      if (k > n) continue;
      SCOPED_TRACE(std::to_string(n) + " ranks, " + std::to_string(k) + " roots");
      int covered = 0;
      for (int i = 0; i < k; ++i) {
        const int first = nccl_root_first_rank(i, n, k), size = nccl_root_ranks(i, n, k);
        ASSERT_EQ(first, covered);
        ASSERT_EQ(size, n / k + (i < n % k ? 1 : 0));
        EXPECT_EQ(nccl_root_of_rank(first, n, k), i);
        EXPECT_EQ(nccl_root_of_rank(first + size - 1, n, k), i);
        EXPECT_EQ(nccl_root_made_by(first, n, k), i);
        covered += size;
      }
      EXPECT_EQ(covered, n);
      EXPECT_EQ(static_cast<int>(makers(n, k).size()), k);
    }
}

TEST(NcclRoots, MadeByRefusesWhatNcclRefuses) {
  EXPECT_EQ(nccl_root_made_by(0, 4, 0), -1);   // nId < 1
  EXPECT_EQ(nccl_root_made_by(0, 4, 5), -1);   // nId > nranks: "improper usage"
  EXPECT_EQ(nccl_root_made_by(-1, 4, 2), -1);
  EXPECT_EQ(nccl_root_made_by(4, 4, 2), -1);
}

// auto: one root up to 2,048 ranks, then one per 2,048, at most 64: a
// root's last rank waits at most 2048 / 7000 s in NCCL's stagger (7,000 a
// second past 256 ranks a root) up to 131,072 ranks.
TEST(NcclRoots, AutoTakesARootPer2048RanksUpTo64) {
  auto roots = [](int n) { return plan_nccl_roots(n, 0, 22809, true, false).roots; };
  EXPECT_EQ(roots(1), 1);
  EXPECT_EQ(roots(2048), 1);
  EXPECT_EQ(roots(2049), 2);
  EXPECT_EQ(roots(100000), 49);
  EXPECT_EQ(roots(131072), 64);
  EXPECT_EQ(roots(1000000), 64);
  for (int n : {2049, 100000, 131072})
    EXPECT_LE(nccl_root_ranks(0, n, roots(n)), kNcclRanksPerRoot) << n;
  EXPECT_EQ(plan_nccl_roots(100000, 0, 22809, true, false).describe(),
            "ncclCommInitRankScalable with 49 roots");
  EXPECT_EQ(plan_nccl_roots(8, 0, 22809, true, false).describe(),
            "ncclCommInitRankConfig with one root");
}

TEST(NcclRoots, ASettingIsTakenUpToTheRanks) {
  EXPECT_EQ(plan_nccl_roots(16, 4, 22809, true, false).roots, 4);
  EXPECT_EQ(plan_nccl_roots(3, 4, 22809, true, false).roots, 3);  // nId <= nranks
  EXPECT_EQ(plan_nccl_roots(100000, 1, 22809, true, false).roots, 1);
  EXPECT_TRUE(plan_nccl_roots(16, 4, 22809, true, false).why.empty());
}

// Without ncclCommInitRankScalable (NCCL before 2.23), or with NCCL_COMM_ID
// (src/init.cc ncclCommInitRankDev: rank 0 alone keeps one id), one root,
// saying why.
TEST(NcclRoots, OneRootWithoutScalableInitOrWithNcclCommId) {
  const auto old = plan_nccl_roots(100000, 0, 22203, false, false);
  EXPECT_EQ(old.roots, 1);
  EXPECT_EQ(old.wanted, 49);
  EXPECT_NE(old.why.find("NCCL 2.22.3 has no ncclCommInitRankScalable"), std::string::npos)
      << old.why;
  const auto id = plan_nccl_roots(16, 4, 22809, true, true);
  EXPECT_EQ(id.roots, 1);
  EXPECT_NE(id.why.find("NCCL_COMM_ID"), std::string::npos) << id.why;
  // Nothing to explain where one root was all that was wanted.
  EXPECT_TRUE(plan_nccl_roots(8, 0, 22203, false, true).why.empty());
}

TEST(NcclRoots, SettingIsAutoOrACountFrom1To64) {
  auto setting = [](const char* v) {
    Env e;
    if (v) e.set("GPUDIAG_NCCL_ROOTS", v);
    return nccl_roots_setting(e);
  };
  EXPECT_EQ(setting(nullptr), 0);
  EXPECT_EQ(setting("auto"), 0);
  EXPECT_EQ(setting("1"), 1);
  EXPECT_EQ(setting("64"), 64);
  for (const char* bad : {"0", "65", "-1", "4x", "x", "1e3", " 4", "0004", "99999999999"}) {
    SCOPED_TRACE(bad);
    try {
      setting(bad);
      ADD_FAILURE() << "accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(e.one_line().find("GPUDIAG_NCCL_ROOTS"), std::string::npos) << e.one_line();
    }
  }
  try {
    setting("4\x1b[2J");
    ADD_FAILURE() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(e.one_line().find('\x1b'), std::string::npos) << "a control character reached the "
                                                              "terminal";
  }
}

}  // namespace
}  // namespace gpudiag
