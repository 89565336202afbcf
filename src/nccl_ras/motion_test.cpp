// Two samples of RAS's counts: a busy job's skew (counts that differ and move) is no
// finding and never "behind"; a rank whose count differs and does not move is.
#include "nccl_ras/motion.h"

#include <gtest/gtest.h>

#include "nccl_ras/findings.h"

namespace gpudiag::ras {
namespace {

constexpr const char* kComm = "5a1e4c0ffee12345";

/// A group at `value`: `count` ranks, of which `named` are named (as JSON names all).
ValueGroup group(const std::string& value, long long count, std::vector<long long> named) {
  ValueGroup g{value, count, {}};
  for (auto r : named) g.ranks.push_back({r, {"127.0.0.1", 4000 + r, std::to_string(r)}});
  return g;
}

/// A report of 4 ranks whose AllReduce counts are `groups` (none: they agree).
Report sample(std::vector<ValueGroup> groups, const std::string& format = "json") {
  Report r;
  r.nccl_version = "2.30.7";
  r.format = format;
  r.communicators = 1;
  if (!groups.empty())
    r.mismatches.push_back({kComm, 4, "AllReduce", std::move(groups), Motion::unknown, {}, {}});
  return r;
}

bool says_behind(const Report& r) {
  for (const auto& l : finding_lines(r))
    if (l.find("behind") != std::string::npos) return true;
  for (const auto& l : motion_lines(r))
    if (l.find("behind") != std::string::npos) return true;
  return false;
}

TEST(RasMotion, BusyJobWhoseCountsMoveIsNoFinding) {
  // A launch apart in both samples, every rank further on in the second.
  auto first = sample({group("120", 3, {0, 1, 2}), group("119", 1, {3})});
  ASSERT_TRUE(counts_differ(first));
  compare_samples(first, sample({group("125", 3, {0, 1, 2}), group("124", 1, {3})}), 2);
  EXPECT_EQ(first.mismatches[0].motion, Motion::moved);
  EXPECT_TRUE(finding_lines(first).empty());
  auto moving = motion_lines(first);
  ASSERT_EQ(moving.size(), 1u);
  EXPECT_TRUE(
      moving[0].starts_with("in flight: communicator 5a1e4c0ffee12345 (4 ranks): "
                            "AllReduce counts differ: "))
      << moving[0];
  EXPECT_NE(moving[0].find("2.0 s later: ranks 0-2 issued 125"), std::string::npos) << moving[0];
  EXPECT_FALSE(says_behind(first));
}

TEST(RasMotion, SkewedByTwoAndCaughtUpIsNoFinding) {
  // Ranks two launches apart; in the second sample they agree.
  auto first = sample({group("120", 2, {0, 1}), group("119", 1, {2}), group("118", 1, {3})});
  compare_samples(first, sample({}), 2);
  EXPECT_EQ(first.mismatches[0].motion, Motion::moved);
  EXPECT_TRUE(finding_lines(first).empty());
  EXPECT_NE(motion_lines(first).at(0).find("later: they agree"), std::string::npos);
  EXPECT_FALSE(says_behind(first));
}

TEST(RasMotion, TextWithTheMajorityBehindAndMovingIsNoFinding) {
  // The text names outliers only: rank 0 launched ahead; the three others are one unnamed
  // group, and in the second sample no group is at their count any more.
  auto first = sample({group("119", 3, {}), group("120", 1, {0})}, "text");
  compare_samples(first, sample({group("122", 3, {}), group("123", 1, {0})}, "text"), 2);
  EXPECT_EQ(first.mismatches[0].motion, Motion::moved);
  EXPECT_TRUE(finding_lines(first).empty());
  EXPECT_FALSE(says_behind(first));
}

TEST(RasMotion, ARankThatDoesNotMoveIsBehind) {
  auto first = sample({group("120", 3, {0, 1, 2}), group("119", 1, {3})});
  compare_samples(first, first, 2);  // nothing moved: the job waits for rank 3
  EXPECT_EQ(first.mismatches[0].motion, Motion::still);
  auto lines = finding_lines(first);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].ends_with("issued 119; behind: rank 3")) << lines[0];
  EXPECT_TRUE(motion_lines(first).empty());
}

TEST(RasMotion, AStuckRankAmongMovingOnesIsBehind) {
  // The others launched ahead (asynchronously) while rank 3 stayed at 119; the text names
  // rank 3 in the first sample, and the majority later is one unnamed group.
  auto first = sample({group("120", 3, {}), group("119", 1, {3})}, "text");
  compare_samples(first, sample({group("121", 3, {}), group("119", 1, {3})}, "text"), 2);
  EXPECT_EQ(first.mismatches[0].motion, Motion::still);
  EXPECT_NE(finding_lines(first).at(0).find("; behind: rank 3"), std::string::npos);
  // Unnamed and still at its count with more ranks there than were below it.
  auto text = sample({group("119", 3, {}), group("120", 1, {0})}, "text");
  compare_samples(text, sample({group("119", 3, {}), group("121", 1, {0})}, "text"), 2);
  EXPECT_EQ(text.mismatches[0].motion, Motion::still);
  EXPECT_NE(finding_lines(text).at(0).find("; behind: 3 ranks"), std::string::npos);
}

TEST(RasMotion, OneSampleClaimsNothing) {
  auto r = sample({group("120", 3, {0, 1, 2}), group("119", 1, {3})});
  one_sample(r, "no time for a second 2 s later within 1 s");
  EXPECT_TRUE(finding_lines(r).empty());
  auto lines = motion_lines(r);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].starts_with("unconfirmed: ")) << lines[0];
  EXPECT_NE(lines[0].find("one sample only (no time for a second 2 s later within 1 s)"),
            std::string::npos)
      << lines[0];
  EXPECT_FALSE(says_behind(r));
}

TEST(RasMotion, AgreeingAfterLosingRanksTellsNothing) {
  auto first = sample({group("120", 3, {0, 1, 2}), group("119", 1, {3})});
  auto later = sample({});
  later.missing.push_back({kComm, 1, {{3, {}}}});
  compare_samples(first, later, 2);
  EXPECT_EQ(first.mismatches[0].motion, Motion::unknown);
  EXPECT_TRUE(motion_lines(first).at(0).starts_with("unconfirmed: "));
}

TEST(RasMotion, StatesAreNotCounts) {
  Report r = sample({});
  r.mismatches.push_back({kComm,
                          4,
                          "status",
                          {group("RUNNING", 3, {}), group("ABORT", 1, {2})},
                          Motion::unknown,
                          {},
                          {}});
  EXPECT_FALSE(counts_differ(r));
  EXPECT_EQ(finding_lines(r).size(), 1u);  // a state mismatch is a finding from one sample
}

}  // namespace
}  // namespace gpudiag::ras
