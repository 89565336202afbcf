#include "report/status_line.h"

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

TEST(StatusLine, OkMatchesTheContract) {
  RankRecord r;
  r.host = "node7";
  r.local_rank = 3;
  r.rank = 11;
  r.world_size = 16;
  EXPECT_EQ(status_line(r), "[node7-3] is OK (global rank: 11/16)\n");
}

TEST(StatusLine, BrokenCarriesTheReasonOnOneLine) {
  RankRecord r;
  r.host = "node7";
  r.local_rank = 0;
  r.fail("device", "cudaMalloc failed:\nout of memory; try: lower --mem");
  EXPECT_EQ(status_line(r), "[node7-0] is broken: cudaMalloc failed: out of memory; try: lower --mem\n");
}

TEST(StatusLine, FirstFailureWins) {
  RankRecord r;
  r.host = "h";
  r.fail("device", "first");
  r.fail("barrier", "second");
  EXPECT_EQ(r.failed_phase, "device");
  EXPECT_EQ(status_line(r), "[h-0] is broken: first\n");
}

}  // namespace
}  // namespace gpudiag
