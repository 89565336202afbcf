// The job's exit status rule (job_status.h): every case is decided by how the
// ranks ended, so the order they are listed in (the order they ended in)
// never changes it.
#include "launch/job_status.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>

namespace gpudiag::launch {
namespace {

RankOutcome exited(int rank, int code) { return {rank, ExitStatus::exited(code)}; }
/// Died of `sig` on its own (a crash, a kill from outside the launcher).
RankOutcome died(int rank, int sig) { return {rank, ExitStatus::killed(sig)}; }
/// Killed by `sig` that the launcher sent it while stopping the job.
RankOutcome stopped(int rank, int sig) {
  return {rank, ExitStatus::killed(sig), false, true, true};
}

/// The status for `ranks` in every order they could have ended in; fails
/// the test if any order gives another.
int status_in_any_order(std::vector<RankOutcome> ranks, JobStop stop = {}) {
  std::sort(ranks.begin(), ranks.end(),
            [](const RankOutcome& a, const RankOutcome& b) { return a.rank < b.rank; });
  const int first = job_exit_status(ranks, stop);
  while (std::next_permutation(ranks.begin(), ranks.end(),
                               [](const auto& a, const auto& b) { return a.rank < b.rank; }))
    EXPECT_EQ(job_exit_status(ranks, stop), first) << "depends on the order of the ranks";
  return first;
}

TEST(JobExitStatus, EveryRankOkIsZero) {
  EXPECT_EQ(status_in_any_order({exited(0, 0), exited(1, 0), exited(2, 0)}), 0);
}

TEST(JobExitStatus, ANamedFailureBeatsATimeoutThatEndedFirst) {
  // Rank 1 timed out waiting (3) before rank 2 reported what it saw (1):
  // "first in time" said 3 on this run and 1 on another.
  std::vector<RankOutcome> ranks{exited(0, 0), exited(1, 3), exited(2, 1)};
  ranks[1].first_failure = true;
  EXPECT_EQ(status_in_any_order(ranks), 1);
}

TEST(JobExitStatus, ARankThatDiedOnItsOwnBeatsTheRanksThatSawIt) {
  // Rank 0 exited 1 first; rank 3 was then SIGKILLed from outside the launcher.
  std::vector<RankOutcome> ranks{exited(0, 1), exited(1, 1), stopped(2, SIGTERM), died(3, SIGKILL)};
  ranks[0].first_failure = true;
  EXPECT_EQ(status_in_any_order(ranks), 128 + SIGKILL);
}

TEST(JobExitStatus, RanksTheLauncherStoppedDoNotCount) {
  EXPECT_EQ(status_in_any_order({exited(0, 1), stopped(1, SIGTERM), stopped(2, SIGKILL)}), 1);
  EXPECT_EQ(status_in_any_order({exited(0, 3), stopped(1, SIGTERM)}), 3);
  // A rank the launcher sent SIGTERM that then died of SIGSEGV crashed on its own.
  RankOutcome crashed{1, ExitStatus::killed(SIGSEGV), false, true, false};
  EXPECT_EQ(status_in_any_order({exited(0, 1), crashed}), 128 + SIGSEGV);
}

TEST(JobExitStatus, InternalErrorThenBadInputThenOwnDeaths) {
  EXPECT_EQ(status_in_any_order({died(0, SIGSEGV), exited(1, 2), exited(2, 4), exited(3, 1)}), 4);
  EXPECT_EQ(status_in_any_order({died(0, SIGSEGV), exited(1, 2), exited(3, 1)}), 2);
  EXPECT_EQ(status_in_any_order({exited(0, 3), died(1, SIGABRT), exited(2, 1)}), 128 + SIGABRT);
}

TEST(JobExitStatus, TheLowestRankDecidesBetweenDeathsAndBetweenOtherCodes) {
  EXPECT_EQ(status_in_any_order({exited(0, 0), died(1, SIGABRT), died(2, SIGSEGV)}), 128 + SIGABRT);
  EXPECT_EQ(status_in_any_order({exited(0, 0), exited(1, 7), exited(2, 42)}), 7);
  // 3 comes before any other code.
  EXPECT_EQ(status_in_any_order({exited(0, 42), exited(1, 3)}), 3);
}

TEST(JobExitStatus, TheLaunchersOwnDeadlinesGiveThree) {
  EXPECT_EQ(status_in_any_order({stopped(0, SIGTERM), stopped(1, SIGKILL)}, {0, true, false}), 3);
  // A rank killed at --exit-timeout after it printed OK, the other exited 0.
  EXPECT_EQ(status_in_any_order({exited(0, 0), stopped(1, SIGKILL)}, {0, true, false}), 3);
  // A named failure still wins over the deadline.
  EXPECT_EQ(status_in_any_order({exited(0, 1), stopped(1, SIGTERM)}, {0, true, false}), 1);
  // A rank that exited 1 once the launcher stopped a hung job (its peers on
  // another node were stopped first, so its collective failed) is an effect.
  RankOutcome failed_in_stop{1, ExitStatus::exited(1), false, true, false};
  EXPECT_EQ(status_in_any_order({stopped(0, SIGTERM), failed_in_stop}, {0, true, false}), 3);
  EXPECT_EQ(status_in_any_order({stopped(0, SIGTERM), failed_in_stop}), 1);
}

TEST(JobExitStatus, AnInterruptedLauncherReportsItsSignalWhateverTheRanksDid) {
  std::vector<RankOutcome> ranks{exited(0, 1), stopped(1, SIGINT), died(2, SIGSEGV)};
  ranks[0].first_failure = true;
  EXPECT_EQ(status_in_any_order(ranks, {SIGINT, false, false}), 128 + SIGINT);
  EXPECT_EQ(status_in_any_order({exited(0, 0), exited(1, 0)}, {SIGTERM, false, false}),
            128 + SIGTERM);
}

TEST(JobExitStatus, RanksThatNeverEndedAreNotSuccess) {
  RankOutcome stuck{1, std::nullopt, false, true};
  EXPECT_EQ(status_in_any_order({exited(0, 0), stuck}, {0, false, true}), 1);
}

}  // namespace
}  // namespace gpudiag::launch
