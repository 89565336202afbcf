// A round's results folded in the tree give the planner what the flat
// judge's fold of every report gives it, whatever the grouping and order;
// what a group says of ranks outside it is dropped; a text over its budget
// counts the pairs it left out.
#include "sweep/tree_results.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

#include "checks/tree_review.h"

namespace gpudiag::sweep {
namespace {

std::string report(int k, int partner, bool ok, double gbps, const std::string& why = "") {
  return nlohmann::json{{"k", k}, {"p", partner}, {"ok", ok}, {"gbps", gbps}, {"why", why}}.dump();
}

// 16 ranks, pairs (r, r+8) of round 3: a mix of both ends, one end, failures.
std::map<int, std::string> reports() {
  std::map<int, std::string> m;
  for (int r = 0; r < 8; ++r) {
    const int p = r + 8;
    const double g = 10.0 + r * 0.37;
    if (r != 5) m[r] = report(3, p, r != 2, g + 0.1, "a: lost " + std::to_string(r));
    if (r != 6) m[p] = report(3, r, r != 4 && r != 2, g, "b: refused " + std::to_string(p));
  }
  m[7] = report(2, 15, true, 99);  // another round's: not counted
  return m;
}

std::vector<PairResult> sorted(std::vector<PairResult> v) {
  std::sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.a < y.a; });
  return v;
}

void expect_same(const std::vector<PairResult>& x, const std::vector<PairResult>& y) {
  ASSERT_EQ(x.size(), y.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].a, y[i].a);
    EXPECT_EQ(x[i].b, y[i].b);
    EXPECT_EQ(x[i].ok, y[i].ok) << x[i].a;
    EXPECT_EQ(x[i].gbps, y[i].gbps) << x[i].a;
    EXPECT_EQ(x[i].why, y[i].why) << x[i].a;
  }
}

TEST(RoundResults, BothEndsFoldAsThePlannerTakesThem) {
  RoundResults flat(3);
  for (const auto& [r, text] : reports()) flat.add_report(r, text, 16);
  const auto v = sorted(flat.pair_results());
  ASSERT_EQ(v.size(), 8u);  // pair (7,15) from rank 15 alone
  EXPECT_TRUE(v[0].ok);
  EXPECT_DOUBLE_EQ(v[0].gbps, 10.1);  // the faster end
  EXPECT_FALSE(v[2].ok);
  EXPECT_EQ(v[2].why, "a: lost 2");  // the lower rank's reason when both failed
  EXPECT_DOUBLE_EQ(v[2].gbps, 0);
  EXPECT_FALSE(v[4].ok);
  EXPECT_EQ(v[4].why, "b: refused 12");  // the higher's when only it failed
  EXPECT_DOUBLE_EQ(v[4].gbps, 10.0 + 4 * 0.37 + 0.1);
  EXPECT_TRUE(v[5].ok);  // rank 5 never reported: rank 13's end alone
  EXPECT_DOUBLE_EQ(v[5].gbps, 10.0 + 5 * 0.37);
}

TEST(RoundResults, FoldedInGroupsAndJoinedAtTheRootItIsTheFlatFold) {
  const auto all = reports();
  RoundResults flat(3);
  for (const auto& [r, text] : all) flat.add_report(r, text, 16);
  // Groups of 4 ranks (the ends of each pair in different groups), their
  // texts joined by the root in a shuffled order.
  SweepTreeReviewer reviewer(16, std::make_unique<CheckTreeReviewer>());
  std::vector<ChildReview> groups;
  for (int g = 0; g < 4; ++g) {
    std::map<int, std::string> mine;
    for (int r = 4 * g; r < 4 * g + 4; ++r)
      if (all.count(r)) mine[r] = all.at(r);
    groups.push_back({reviewer.review("sweep-3", mine, {}, {}), 4 * g, 4 * g + 3});
  }
  std::shuffle(groups.begin(), groups.end(), std::mt19937(7));
  EXPECT_EQ(reviewer.merge("sweep-3", groups), "");  // nothing for the digest
  auto joined = RoundResults::decode(reviewer.for_judge("sweep-3", groups), 0, 15, 16);
  ASSERT_TRUE(joined);
  expect_same(sorted(joined->pair_results()), sorted(flat.pair_results()));
}

TEST(RoundResults, WhatAGroupSaysOfOtherRanksIsDropped) {
  RoundResults forged(3);
  forged.add({0, 8, 3, false, 0, "forged"});   // ends of ranks 0 and 8
  forged.add({4, 12, 2, true, 50, ""});        // rank 12's end
  auto back = RoundResults::decode(forged.encode(kGroupResultsBudget), 8, 15, 16);
  ASSERT_TRUE(back);
  const auto v = back->pair_results();
  ASSERT_EQ(v.size(), 1u);  // the group of ranks 8-15 speaks for rank 12's end only
  EXPECT_EQ(v[0].a, 4);
  EXPECT_FALSE(RoundResults::decode("{\"k\":3,\"pairs\":7}", 0, 15, 16));
  EXPECT_FALSE(RoundResults::decode("not json", 0, 15, 16));
  auto bad = RoundResults::decode(
      "{\"k\":3,\"pairs\":[[3,2,1,true,1,\"\"],[0,99,1,true,1,\"\"],[0,1,1,true,-1,\"\"],"
      "[0,1,4,true,1,\"\"]]}",
      0, 15, 16);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->size(), 0u);
}

TEST(RoundResults, ATextOverItsBudgetCountsWhatItLeftOut) {
  RoundResults many(1);
  for (int r = 0; r < 400; ++r) many.add({2 * r, 2 * r + 1, 3, true, 12.5, ""});
  auto back = RoundResults::decode(many.encode(4096), 0, 799, 800);
  ASSERT_TRUE(back);
  EXPECT_GT(back->size(), 50u);
  EXPECT_EQ(back->size() + static_cast<std::size_t>(back->cut()), 400u);
}

TEST(RoundResults, OnlyARoundsResultsCheckpointIsTheSweeps) {
  EXPECT_EQ(results_round("sweep-12"), 12);
  EXPECT_FALSE(results_round("sweep-12-peers"));
  EXPECT_FALSE(results_round("sweep-plan-3"));
  EXPECT_FALSE(results_round("exchange"));
  SweepTreeReviewer reviewer(4, std::make_unique<CheckTreeReviewer>());
  EXPECT_EQ(reviewer.review("sweep-exchange", {{0, "{}"}}, {}, {}), "");
  // The check's checkpoints stay the check's: an unreadable record is a failure.
  EXPECT_NE(reviewer.review("exchange", {{0, "{}"}}, {}, {}), "");
}

}  // namespace
}  // namespace gpudiag::sweep
