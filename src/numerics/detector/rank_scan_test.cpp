// The first rank to go inf/nan (rank_scan.h): the earliest batch wins, then
// the earliest time the dumper recorded the frame, then the lowest rank;
// the others bad in that batch are named; the table lists every rank.
#include "numerics/detector/rank_scan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

namespace gpudiag::numerics {
namespace {

RankOutcome bad(int rank, std::uint64_t batch, double time, std::string module = "net.2") {
  RankOutcome r;
  r.rank = rank;
  r.batches = batch + 1;
  r.result.first = Finding{batch, 3, std::move(module), "Linear", "output", false, true, time};
  return r;
}

RankOutcome clean(int rank, std::uint64_t batches) {
  RankOutcome r;
  r.rank = rank;
  r.batches = batches;
  return r;
}

TEST(RankScan, TheEarliestBatchThenTimeThenRank) {
  const std::vector<RankOutcome> ranks = {bad(0, 6, 10.0), bad(1, 5, 20.0), bad(2, 5, 19.5),
                                          clean(3, 8)};
  const auto f = first_bad(ranks);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rank, 2);  // batch 5, recorded before rank 1's
  EXPECT_EQ(f->also, std::vector<int>{1});
  const std::vector<RankOutcome> no_times = {bad(3, 5, NAN), bad(1, 5, NAN), bad(2, 6, NAN)};
  EXPECT_EQ(first_bad(no_times)->rank, 1);
  EXPECT_FALSE(first_bad(std::vector<RankOutcome>{clean(0, 2), clean(1, 2)}));
}

// A frame the dumper recorded no time for sorts after one with a time, in
// either order of the ranks; among those without, the lowest rank.
TEST(RankScan, AFrameWithoutATimeComesAfterOneWithATime) {
  for (const auto& ranks : {std::vector<RankOutcome>{bad(0, 5, NAN), bad(1, 5, 30.0)},
                            std::vector<RankOutcome>{bad(1, 5, 30.0), bad(0, 5, NAN)}}) {
    const auto f = first_bad(ranks);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->rank, 1);
    EXPECT_EQ(f->also, std::vector<int>{0});
  }
  // An earlier batch still wins, time or not.
  EXPECT_EQ(first_bad(std::vector<RankOutcome>{bad(0, 4, NAN), bad(1, 5, 1.0)})->rank, 0);
}

TEST(RankScan, TheLineAndTheTable) {
  const std::vector<RankOutcome> ranks = {bad(0, 6, 10.0, "net.0"), bad(1, 5, 20.0),
                                          bad(2, 5, 21.0), bad(3, 5, 22.0), clean(4, 8)};
  std::ostringstream out;
  print_rank_table(out, ranks);
  EXPECT_EQ(out.str(),
            "first inf/nan: rank 1, batch 5, frame 3 (net.2 Linear) output (also ranks 2-3)\n"
            "rank  batch  first inf/nan\n"
            "   0      6  frame 3 (net.0 Linear) output: inf\n"
            "   1      5  frame 3 (net.2 Linear) output: inf\n"
            "   2      5  frame 3 (net.2 Linear) output: inf\n"
            "   3      5  frame 3 (net.2 Linear) output: inf\n"
            "   4      -  none in 8 batches\n");
  const auto j = rank_table_json(ranks);
  EXPECT_EQ(j["first"]["rank"], 1);
  EXPECT_EQ(j["first"]["also_ranks"], nlohmann::json::array({2, 3}));
  EXPECT_EQ(j["ranks"][4]["first"], nullptr);
}

}  // namespace
}  // namespace gpudiag::numerics
