#include "launch/summary.h"

#include <gtest/gtest.h>

namespace gpudiag::launch {
namespace {

TEST(FormatRanks, CompressesRuns) {
  EXPECT_EQ(format_ranks({}), "");
  EXPECT_EQ(format_ranks({3}), "3");
  EXPECT_EQ(format_ranks({4, 3}), "3,4");
  EXPECT_EQ(format_ranks({8, 0, 2, 1, 5, 7, 2}), "0-2,5,7,8");
}

TEST(JobSummary, AllOk) {
  std::vector<RankOutcome> all{{0, ExitStatus::exited(0)}, {1, ExitStatus::exited(0)}};
  EXPECT_EQ(job_summary(all, ""), "2/2 ranks OK");
}

TEST(JobSummary, NamesTheFirstFailureThenGroupsTheRest) {
  std::vector<RankOutcome> o{
      {0, ExitStatus::killed(15), false, true, true}, {1, ExitStatus::exited(0)},
      {2, ExitStatus::killed(15), false, true, true}, {3, ExitStatus::exited(1), true, false},
      {4, ExitStatus::exited(1), false, false},       {5, std::nullopt, false, true},
  };
  EXPECT_EQ(job_summary(o, "exit status 1"),
            "1/6 ranks OK; rank 3 exited with status 1 (first failure); "
            "ranks 0,2 killed by SIGTERM (stopped by the launcher); "
            "rank 4 exited with status 1; "
            "rank 5 did not exit (stopped by the launcher); exit status 1");
}

TEST(JobSummary, ASignalTheLauncherDidNotSendIsNotItsStop) {
  // Rank 1 got the launcher's SIGTERM, ignored it, and was then SIGKILLed from
  // outside; rank 2 was killed at --exit-timeout (the launcher's own SIGKILL).
  std::vector<RankOutcome> o{
      {0, ExitStatus::exited(1), true, false},
      {1, ExitStatus::killed(9), false, true, false},
      {2, ExitStatus::killed(9), false, false, true},
  };
  EXPECT_EQ(job_summary(o, ""),
            "0/3 ranks OK; rank 0 exited with status 1 (first failure); "
            "rank 1 killed by SIGKILL; rank 2 killed by SIGKILL (stopped by the launcher)");
}

// A sweep that names nodes to exclude exits 1 on every rank: its verdict, said
// as one, not as failed ranks.
TEST(JobSummary, ExitsWithAVerdictAreFinishedRanks) {
  const std::string v = "sweep: 1 node to exclude";
  std::vector<RankOutcome> all{{0, ExitStatus::exited(1), false, false, false, v},
                               {1, ExitStatus::exited(1), false, false, false, v}};
  EXPECT_EQ(job_summary(all, "exit status 1"),
            "2/2 ranks finished; their verdict: sweep: 1 node to exclude; exit status 1");
  all.push_back({2, ExitStatus::killed(9)});
  EXPECT_EQ(job_summary(all, ""),
            "0/3 ranks OK; ranks 0,1 finished with a verdict: sweep: 1 node to exclude; "
            "rank 2 killed by SIGKILL");
}

TEST(ExitStatus, DescribesLikeAShell) {
  EXPECT_EQ(ExitStatus::exited(3).describe(), "exited with status 3");
  EXPECT_EQ(ExitStatus::killed(9).describe(), "killed by SIGKILL");
  EXPECT_EQ(ExitStatus::killed(9).shell_status(), 137);
  EXPECT_EQ(ExitStatus::exited(3).shell_status(), 3);
  EXPECT_EQ(signal_name(64), "signal 64");
  EXPECT_TRUE(ExitStatus::exited(0).ok());
  EXPECT_FALSE(ExitStatus::killed(15).ok());
}

}  // namespace
}  // namespace gpudiag::launch
