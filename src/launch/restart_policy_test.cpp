// The restart policy (restart_policy.h): which exceptions an attempt can be
// told by (a place in the user's code, a rank that exited by itself, not a
// peer's or the node's failure), and the decision over sequences of attempts:
// only the same error on the same rank in two attempts in a row stops the
// restarts, under on-new-error; always restarts as before.
#include "launch/restart_policy.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpudiag::launch
