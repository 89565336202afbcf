// The restart policy (restart_policy.h): which exceptions an attempt can be
// told by (a place in the user's code, a rank that exited by itself, not a
// peer's or the node's failure), and the decision over sequences of attempts:
// only the same error on the same rank in two attempts in a row stops the
// restarts, under on-new-error; always restarts as before. Where a hung job
// stood (hang_point()) from its ranks' stacks, and the same rank hung at the
// same line of its own code in two attempts in a row stopping the restarts.
#include "launch/restart_policy.h"

#include <gtest/gtest.h>

#include "launch/stacks.h"

namespace gpudiag::launch {
namespace {

ChildError restart_test_error(const std::string& message, const std::string& where) {
  return ChildError{message, where, 1764100000};
}

std::optional<AttemptError> restart_test_raised(int rank, const std::string& message, int line = 39,
                                                const std::string& file = "/u/train.py") {
  return attempt_error(rank, ExitStatus::exited(1),
                       restart_test_error(message, "File \"" + file + "\", line " +
                                                       std::to_string(line) + ", in main"));
}

TEST(RestartPolicy, AnExceptionIsToldByRankMessageFileAndLine) {
  const auto e = restart_test_raised(1, "ValueError: step 2 went wrong on rank 1");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->rank, 1);
  EXPECT_EQ(e->message, "ValueError: step 2 went wrong on rank 1");
  EXPECT_EQ(e->file, "/u/train.py");
  EXPECT_EQ(e->line, 39);
  EXPECT_EQ(e->place(), "train.py:39");
  EXPECT_TRUE(e->same_as(*restart_test_raised(1, "ValueError: step 2 went wrong on rank 1")));
  EXPECT_FALSE(e->same_as(*restart_test_raised(0, "ValueError: step 2 went wrong on rank 1")));
  EXPECT_FALSE(e->same_as(*restart_test_raised(1, "ValueError: step 3 went wrong on rank 1")));
  EXPECT_FALSE(e->same_as(*restart_test_raised(1, "ValueError: step 2 went wrong on rank 1", 40)));
  EXPECT_FALSE(e->same_as(
      *restart_test_raised(1, "ValueError: step 2 went wrong on rank 1", 39, "/u/other.py")));
}

TEST(RestartPolicy, WhatCannotBeToldAgainIsNoError) {
  const ChildError value = restart_test_error("ValueError: x", "File \"t.py\", line 3, in f");
  EXPECT_TRUE(attempt_error(0, ExitStatus::exited(1), value));
  // Killed by a signal, succeeded, never ended, no file, no rank.
  EXPECT_FALSE(attempt_error(0, ExitStatus::killed(9), value));
  EXPECT_FALSE(attempt_error(0, ExitStatus::exited(0), value));
  EXPECT_FALSE(attempt_error(0, std::nullopt, value));
  EXPECT_FALSE(attempt_error(0, ExitStatus::exited(1), std::nullopt));
  EXPECT_FALSE(attempt_error(-1, ExitStatus::exited(1), value));
  // No place, or not a frame line.
  EXPECT_FALSE(attempt_error(0, ExitStatus::exited(1), restart_test_error("ValueError: x", "")));
  EXPECT_FALSE(attempt_error(0, ExitStatus::exited(1),
                             restart_test_error("ValueError: x", "File \"t.py\", in f")));
  // The reader's words for a file it could not read.
  EXPECT_FALSE(attempt_error(0, ExitStatus::exited(1),
                             restart_test_error("(the error file is not torch's error JSON)",
                                                "File \"t.py\", line 3, in f")));
}

TEST(RestartPolicy, ThePeersAndTheNodesFailuresAreNotTheWorkloads) {
  for (const char* m :
       {"RuntimeError: [/torch/csrc/distributed/c10d/gloo.cpp:123] Connection closed by peer",
        "RuntimeError: NCCL communicator was aborted on rank 0",
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable",
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL "
        "version 2.18.1",
        "RuntimeError: NCCL error: remote process exited or there was a network error",
        "OSError: [Errno 116] Stale file handle: '/data/shard-3'",
        "OSError: [Errno 5] Input/output error",
        "ReplicaDivergence: replicas diverged at step 20: rank 2 differs from ranks 0-1,3"}) {
    EXPECT_TRUE(not_the_workloads(m)) << m;
    EXPECT_FALSE(restart_test_raised(1, m)) << m;
  }
  for (const char* m : {"ValueError: step 2 went wrong on rank 1",
                        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, invalid usage",
                        "KeyError: 'lr'", "RuntimeError: CUDA out of memory. Tried to allocate"})
    EXPECT_FALSE(not_the_workloads(m)) << m;
}

TEST(RestartPolicy, TheSameErrorInTwoAttemptsInARowStops) {
  RestartJudge judge(RestartPolicy::on_new_error, 3);
  const auto e = restart_test_raised(1, "ValueError: step 2 went wrong on rank 1");
  auto first = judge.decide(0, 1, true, e);
  EXPECT_EQ(first.then, AfterAttempt::restart);
  EXPECT_EQ(first.line, "");
  auto second = judge.decide(1, 1, true, e);
  EXPECT_EQ(second.then, AfterAttempt::repeated_error);
  EXPECT_EQ(second.exit_status, 1);
  EXPECT_EQ(second.policy, "on-new-error");
  EXPECT_EQ(second.line,
            "the same error repeated in attempts 0 and 1 (rank 1 raised ValueError: step 2 went "
            "wrong on rank 1 at train.py:39): a workload error; not restarting "
            "(--restart-policy always would)");
  EXPECT_STREQ(after_attempt_name(second.then), "repeated_error");
}

TEST(RestartPolicy, AnErrorThatDidNotRepeatIsRestarted) {
  RestartJudge judge(RestartPolicy::on_new_error, 5);
  const auto a = restart_test_raised(1, "ValueError: a");
  const auto b = restart_test_raised(1, "ValueError: b");
  EXPECT_EQ(judge.decide(0, 1, true, a).then, AfterAttempt::restart);
  EXPECT_EQ(judge.decide(1, 1, true, b).then, AfterAttempt::restart);
  // A kill between two like errors: not in a row.
  EXPECT_EQ(judge.decide(2, 137, true, std::nullopt).then, AfterAttempt::restart);
  EXPECT_EQ(judge.decide(3, 1, true, b).then, AfterAttempt::restart);
  // Then the same again: stopped at attempt 4.
  const auto end = judge.decide(4, 1, true, b);
  EXPECT_EQ(end.then, AfterAttempt::repeated_error);
  EXPECT_NE(end.line.find("in attempts 3 and 4 (rank 1 raised ValueError: b at train.py:39)"),
            std::string::npos)
      << end.line;
}

TEST(RestartPolicy, SignalsAndOtherRanksNeverRepeat) {
  RestartJudge judge(RestartPolicy::on_new_error, 5);
  EXPECT_EQ(judge.decide(0, 137, true, std::nullopt).then, AfterAttempt::restart);
  EXPECT_EQ(judge.decide(1, 137, true, std::nullopt).then, AfterAttempt::restart);
  EXPECT_EQ(judge.decide(2, 1, true, restart_test_raised(0, "ValueError: x")).then,
            AfterAttempt::restart);
  EXPECT_EQ(judge.decide(3, 1, true, restart_test_raised(1, "ValueError: x")).then,
            AfterAttempt::restart);
}

TEST(RestartPolicy, AlwaysRestartsAsBefore) {
  RestartJudge judge(RestartPolicy::always, 3);
  const auto e = restart_test_raised(1, "ValueError: x");
  for (int attempt = 0; attempt < 3; ++attempt) {
    const auto end = judge.decide(attempt, 1, true, e);
    EXPECT_EQ(end.then, AfterAttempt::restart);
    EXPECT_EQ(end.line, "");
    EXPECT_EQ(end.policy, "always");
  }
  EXPECT_EQ(judge.decide(3, 1, true, e).then, AfterAttempt::out_of_restarts);
}

TEST(RestartPolicy, SuccessDeadlinesAndTheLastRestartAreNotThePolicys) {
  RestartJudge judge(RestartPolicy::on_new_error, 1);
  const auto e = restart_test_raised(1, "ValueError: x");
  EXPECT_EQ(judge.decide(0, 0, true, std::nullopt).then, AfterAttempt::done);
  RestartJudge stopped(RestartPolicy::on_new_error, 3);
  EXPECT_EQ(stopped.decide(0, 3, false, e).then, AfterAttempt::not_restartable);
  // --max-restarts 1: the repeat comes when no restart is left; nothing is said.
  RestartJudge last(RestartPolicy::on_new_error, 1);
  EXPECT_EQ(last.decide(0, 1, true, e).then, AfterAttempt::restart);
  const auto end = last.decide(1, 1, true, e);
  EXPECT_EQ(end.then, AfterAttempt::out_of_restarts);
  EXPECT_EQ(end.line, "");
  // No --max-restarts: never a word.
  RestartJudge none(RestartPolicy::on_new_error, 0);
  EXPECT_EQ(none.decide(0, 1, true, e).then, AfterAttempt::out_of_restarts);
}

/// A Python rank of this node at `frames` (innermost first, "path:line in
/// func"), summarised as the hang report summarises it.
RankStack restart_test_rank(int rank, std::vector<std::string> frames,
                            std::vector<std::string> native = {}, long long sequence = 5) {
  RankStack s;
  s.rank = rank, s.local_rank = rank, s.host = "n1", s.source = "python";
  s.frames = std::move(frames);
  s.native = std::move(native);
  s.sequence = sequence;
  summarise(s);
  return s;
}

const std::string kAllReduce =
    "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py:1536 in all_reduce";

/// Rank `stuck` asleep at /u/train.py:`line`, the other ranks of `world` in all_reduce.
std::vector<RankStack> restart_test_hung(int stuck, int line, int world = 2) {
  std::vector<RankStack> out;
  for (int r = 0; r < world; ++r)
    out.push_back(r == stuck ? restart_test_rank(r, {"/u/train.py:" + std::to_string(line) +
                                                         " in main"},
                                                 {"clock_nanosleep", "time_sleep", "main"})
                             : restart_test_rank(r, {kAllReduce, "/u/train.py:130 in main"}));
  return out;
}

TEST(RestartPolicy, AHangIsToldByTheWaitedForRankInItsOwnCode) {
  const auto h = hang_point(restart_test_hung(1, 111, 4));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->rank, 1);
  EXPECT_EQ(h->local, 1);
  EXPECT_TRUE(h->hang);
  EXPECT_EQ(h->message, "");
  EXPECT_EQ(h->file, "/u/train.py");
  EXPECT_EQ(h->place(), "train.py:111");
  EXPECT_TRUE(h->same_as(*hang_point(restart_test_hung(1, 111))));
  EXPECT_FALSE(h->same_as(*hang_point(restart_test_hung(1, 112))));
  EXPECT_FALSE(h->same_as(*hang_point(restart_test_hung(0, 111))));
  // An exception raised at that very line is not the hang.
  auto raised = restart_test_raised(1, "ValueError: x", 111, "/u/train.py");
  raised->local = 1;
  EXPECT_FALSE(h->same_as(*raised));
}

TEST(RestartPolicy, AHangOfAPeerTheGpuOrALibraryIsNotTold) {
  // Every rank waits in the collective: nobody is waited for.
  EXPECT_FALSE(hang_point({restart_test_rank(0, {kAllReduce, "/u/train.py:130 in main"}),
                           restart_test_rank(1, {kAllReduce, "/u/train.py:130 in main"})}));
  // Two ranks of four waited for, at two places.
  auto two = restart_test_hung(1, 111, 4);
  two[2] = restart_test_rank(2, {"/u/train.py:90 in load"});
  EXPECT_FALSE(hang_point(two));
  // Its own line, but inside a sync on its GPU (no process group: not a wait on a peer).
  auto gpu = restart_test_hung(1, 111);
  gpu[1] = restart_test_rank(1, {"/u/train.py:111 in main"},
                             {"cuStreamSynchronize", "cudaStreamSynchronize", "main"}, -1);
  ASSERT_FALSE(gpu[1].waiting);
  EXPECT_FALSE(hang_point(gpu));
  // In torch's Python (a device synchronize, a load): not its own code.
  auto library = restart_test_hung(1, 111);
  library[1] = restart_test_rank(
      1, {"/usr/lib/python3/dist-packages/torch/cuda/__init__.py:566 in synchronize",
          "/u/train.py:111 in main"},
      {}, -1);
  EXPECT_FALSE(hang_point(library));
  // Another node's rank: its summary only, no frames.
  auto remote = restart_test_hung(1, 111);
  remote[1].frames.clear();
  remote[1].source.clear();
  EXPECT_FALSE(hang_point(remote));
}

TEST(RestartPolicy, OnlyTheSameHangTwiceInARowStopsTheRestarts) {
  RestartJudge judge(RestartPolicy::on_new_error, 3);
  EXPECT_EQ(judge.decide(0, 3, true, hang_point(restart_test_hung(1, 111))).then,
            AfterAttempt::restart);
  const auto end = judge.decide(1, 3, true, hang_point(restart_test_hung(1, 111)));
  EXPECT_EQ(end.then, AfterAttempt::repeated_hang);
  EXPECT_STREQ(after_attempt_name(end.then), "repeated_hang");
  EXPECT_EQ(end.exit_status, 3);
  EXPECT_EQ(end.line,
            "the job stopped at the same point in attempts 0 and 1 (rank 1 waited for by the "
            "others, in its own code at train.py:111): a workload hang; not restarting "
            "(--restart-policy always would)");
  // Another line, another rank, a hang not told, a hang then an exception: restarted.
  RestartJudge moving(RestartPolicy::on_new_error, 5);
  EXPECT_EQ(moving.decide(0, 3, true, hang_point(restart_test_hung(1, 111))).then,
            AfterAttempt::restart);
  EXPECT_EQ(moving.decide(1, 3, true, hang_point(restart_test_hung(1, 112))).then,
            AfterAttempt::restart);
  EXPECT_EQ(moving.decide(2, 3, true, hang_point(restart_test_hung(0, 112))).then,
            AfterAttempt::restart);
  EXPECT_EQ(moving.decide(3, 3, true, std::nullopt).then, AfterAttempt::restart);
  EXPECT_EQ(moving.decide(4, 3, true, hang_point(restart_test_hung(0, 112))).then,
            AfterAttempt::restart);
  RestartJudge always(RestartPolicy::always, 3);
  EXPECT_EQ(always.decide(0, 3, true, hang_point(restart_test_hung(1, 111))).then,
            AfterAttempt::restart);
  EXPECT_EQ(always.decide(1, 3, true, hang_point(restart_test_hung(1, 111))).then,
            AfterAttempt::restart);
}

}  // namespace
}  // namespace gpudiag::launch
