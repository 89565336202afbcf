// The records a verdict makes: a launch whose attempt found its node at fault
// blames it (and says in how many attempts), a failed job otherwise does not;
// a sweep's node verdicts; the node's GPUs as the NVIDIA driver lists them.
#include "history/verdicts.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpudiag::history {
namespace {

const Stamp kStamp{"slurm-7", "SLURM_JOB_ID=7", "2026-12-02T20:31:07Z"};

launch::AttemptEnd attempt(int n, int status, std::string fault) {
  launch::AttemptEnd a;
  a.attempt = n;
  a.exit_status = status;
  a.node_fault = std::move(fault);
  return a;
}

TEST(HistoryVerdicts, ALaunchBlamesItsNodeOnlyForANodeFault) {
  auto r = launch_record({attempt(0, 135, "rank 1 [n3] was killed by SIGBUS"), attempt(1, 0, "")},
                         0, "n3", kStamp);
  EXPECT_EQ(r.verdict, Verdict::fault);
  EXPECT_EQ(r.reason, "rank 1 [n3] was killed by SIGBUS (at fault in 1 of 2 attempts)");
  EXPECT_EQ(r.job_id, "slurm-7");
  EXPECT_EQ(r.command, "launch");
  r = launch_record({attempt(0, 1, "")}, 1, "n3", kStamp);
  EXPECT_EQ(r.verdict, Verdict::other);  // a workload error is not the node's
  r = launch_record({attempt(0, 0, "")}, 0, "n3", kStamp);
  EXPECT_EQ(r.verdict, Verdict::ok);
  EXPECT_EQ(r.reason, "");
}

TEST(HistoryVerdicts, EverySweepStateButOkIsAFault) {
  sweep::SweepOutcome out;
  out.hosts = {"a", "b", "c"};
  out.verdicts = {{0, sweep::NodeState::ok, std::nullopt, 0, ""},
                  {1, sweep::NodeState::failed, std::nullopt, 0, "its hardware: Xid 79"},
                  {2, sweep::NodeState::missing, std::nullopt, 0, "never arrived"}};
  auto r = sweep_records(out, kStamp);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].verdict, Verdict::ok);
  EXPECT_EQ(r[1].verdict, Verdict::fault);
  EXPECT_EQ(r[1].host, "b");
  EXPECT_NE(r[1].reason.find("Xid 79"), std::string::npos) << r[1].reason;
  EXPECT_EQ(r[2].verdict, Verdict::fault);
  // A host the history kept out was not tested: no fresh fault against it.
  r = sweep_records(out, kStamp, {{"b", "at fault in 2 jobs of the history"}});
  EXPECT_EQ(r[1].verdict, Verdict::other);
}

TEST(HistoryVerdicts, TheDriversListOfGpus) {
  char tmpl[] = "/tmp/gpudiag-proc-XXXXXX";
  const std::string root = ::mkdtemp(tmpl);
  const auto dir = std::filesystem::path(root) / "driver/nvidia/gpus/0000:3b:00.0";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "information") << "Model: \t\t NVIDIA H100 80GB HBM3\n"
                                        "GPU UUID: \t GPU-8f2c0000-1111-2222-3333-444455556666\n"
                                        "Bus Location: \t 0000:3b:00.0\n";
  auto gpus = local_gpus(root);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].uuid, "GPU-8f2c0000-1111-2222-3333-444455556666");
  EXPECT_EQ(gpus[0].bus_id, "0000:3b:00.0");
  EXPECT_TRUE(local_gpus(root + "/none").empty());
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gpudiag::history
