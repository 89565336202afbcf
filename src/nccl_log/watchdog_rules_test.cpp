// The watchdog rules on constructed 4-rank jobs: the rank behind named from the sequence numbers
// PyTorch logs (each torch version's lines), the group the numbers belong to kept apart, ranks
// that logged nothing said to be unknown; and healthy jobs of the hard kind (INFO-heavy, timeout
// settings and "watchdog" words in INFO lines, ranks skewed or in several groups) that must
// produce no finding. The end-to-end case is tests/integration/test_nccl_log_watchdog.py.
#include <gtest/gtest.h>

#include <sstream>

#include "nccl_log/findings.h"

namespace gpudiag::nccl_log {
namespace watchdog_rules_test {  // named: the unity build puts this folder's tests in one unit

Job build(const std::string& text, const std::string& name = "job.log") {
  JobBuilder b;
  std::istringstream in(text);
  b.add_stream(in, name);
  return b.finish();
}

const Finding* find(const std::vector<Finding>& fs, const std::string& id) {
  for (const auto& f : fs)
    if (f.id == id) return &f;
  return nullptr;
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

using Names = std::vector<std::string>;

// torch 2.5/2.6 lines: "[rankN]:[E... ProcessGroupNCCL.cpp:L] MESSAGE".
std::string torch(int rank, const std::string& msg, char level = 'E') {
  return "[rank" + std::to_string(rank) + "]:[" + level +
         "1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] " + msg + "\n";
}
std::string pg(int rank, const std::string& id = "0") {
  return "[PG ID " + id + " PG GUID " + id + (id == "0" ? "(default_pg)" : "") + " Rank " +
         std::to_string(rank) + "] ";
}
std::string timeout(int rank, long seq, const std::string& op = "BROADCAST") {
  return "[Rank " + std::to_string(rank) +
         "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=" + std::to_string(seq) +
         ", OpType=" + op +
         ", NumelIn=131072000, NumelOut=131072000, Timeout(ms)=600000) ran for 600081 "
         "milliseconds before timing out.";
}
std::string numbers(const std::string& lead, long enq, long done) {
  return lead + "last enqueued NCCL work: " + std::to_string(enq) +
         ", last completed NCCL work: " + std::to_string(done) + ".";
}
std::string at_work(long seq) {
  return "Exception (either an error or timeout) detected by watchdog at work: " +
         std::to_string(seq) + ", ";
}
std::string take_down(int rank) {
  return torch(rank, "[Rank " + std::to_string(rank) +
                         "] Some NCCL operations have failed or timed out. Due to the "
                         "asynchronous nature of CUDA kernels, subsequent GPU operations might "
                         "run on corrupted/incomplete data.") +
         torch(rank, "[Rank " + std::to_string(rank) +
                         "] To avoid data inconsistency, we are taking the entire process down.");
}
/// NCCL INFO lines of a healthy init for 4 ranks on one node.
std::string nccl_init() {
  std::string s;
  for (int r = 0; r < 4; ++r) {
    std::string id = "node1:10" + std::to_string(r) + ":20" + std::to_string(r) + " [" +
                     std::to_string(r) + "] NCCL INFO ";
    s += id + "Bootstrap : Using eth0:10.0.0.1<0>\n" + id + "NCCL version 2.21.5+cuda12.4\n" + id +
         "Channel 00/0 : " + std::to_string(r) + "[" + std::to_string(r) + "] -> " +
         std::to_string((r + 1) % 4) + "[" + std::to_string((r + 1) % 4) + "] via P2P/IPC/read\n" +
         id + "comm 0x10" + std::to_string(r) + " rank " + std::to_string(r) +
         " nranks 4 cudaDev " + std::to_string(r) + " busId " + std::to_string(r + 1) +
         "8000 - Init COMPLETE\n";
  }
  return s;
}

TEST(NcclLogWatchdog, RankBehindIsNamedFromItsSequenceNumbers) {
  std::string log = nccl_init();
  for (int r : {0, 1, 3})
    log += torch(r, timeout(r, 42)) + torch(r, pg(r) + numbers(at_work(42), 42, 41)) + take_down(r);
  log += torch(2, pg(2) +
                      "Received a dump signal due to a collective timeout from  rank 0 and we "
                      "will try our best to dump the debug info. Last enqueued NCCL work: 41, "
                      "last completed NCCL work: 41.This is most likely caused by incorrect "
                      "usages of collectives");
  auto fs = find_problems(build(log));
  const Finding* f = find(fs, "torch-watchdog-timeout");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::problem);
  EXPECT_EQ(f->blamed, (Names{"rank 2"}));
  EXPECT_EQ(f->waiting, (Names{"rank 0", "rank 1", "rank 3"}));
  EXPECT_TRUE(f->unknown.empty());
  EXPECT_TRUE(has(f->title, "collective 42 (BROADCAST) after 600081 ms on rank 0, rank 1, rank 3"))
      << f->title;
  EXPECT_TRUE(has(f->title, "rank 2 is behind: last enqueued collective 41")) << f->title;
  ASSERT_GE(f->evidence.size(), 3u);
  EXPECT_TRUE(has(f->evidence[0].text, "Watchdog caught collective operation timeout"));
  EXPECT_TRUE(has(f->evidence[1].text, "[rank2]:"));
  EXPECT_TRUE(has(f->evidence[2].text, "taking the entire process down"));
  EXPECT_TRUE(has(f->remedy, "py-spy dump"));
  EXPECT_TRUE(has_problem(fs));
  EXPECT_EQ(find(fs, "torch-nccl-error"), nullptr);  // the take-down follows the timeout
}

TEST(NcclLogWatchdog, EveryTorchVersionsLines) {
  // 2.3: "[PG N Rank R] Timeout at NCCL work"; rank 2's periodic INFO line says where it is.
  std::string v23 = nccl_init();
  for (int r : {0, 1, 3})
    v23 += torch(r, timeout(r, 42)) + torch(r, "[PG 0 Rank " + std::to_string(r) + "] " +
                                                   numbers("Timeout at NCCL work: 42, ", 42, 41));
  v23 += torch(2, "[PG 0 Rank 2] " + numbers("NCCL Work update periodically: ", 41, 41), 'I');
  // 2.7+: "Work timeout is detected by watchdog".
  std::string v27;
  for (int r : {0, 1, 3})
    v27 += torch(r, timeout(r, 42)) +
           torch(r, pg(r) + numbers("Work timeout is detected by watchdog at work: 42, ", 42, 41));
  v27 += torch(2, pg(2) + numbers("NCCL Work update periodically: ", 41, 41), 'I');
  for (const auto& log : {v23, v27}) {
    const Finding* f = nullptr;
    auto fs = find_problems(build(log));
    f = find(fs, "torch-watchdog-timeout");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->blamed, (Names{"rank 2"})) << f->title;
  }
  // 1.13-2.2: no sequence numbers, no "[rankN]:"; the take-down lines name no rank. Rank 2
  // logged nothing: unknown, not blamed.
  std::string v1 = nccl_init();
  for (int r : {0, 1, 3})
    v1 += "[E ProcessGroupNCCL.cpp:458] " + timeout(r, 42) + "\n" +
          "[E ProcessGroupNCCL.cpp:456] Some NCCL operations have failed or timed out.\n"
          "[E ProcessGroupNCCL.cpp:461] To avoid data inconsistency, we are taking the entire "
          "process down.\n";
  auto fs = find_problems(build(v1));
  const Finding* f = find(fs, "torch-watchdog-timeout");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->blamed.empty());
  EXPECT_EQ(f->waiting, (Names{"rank 0", "rank 1", "rank 3"}));
  EXPECT_EQ(f->unknown, (Names{"rank 2 (no watchdog line)"}));
  EXPECT_TRUE(has(f->title, "do not say which rank is behind")) << f->title;
  EXPECT_EQ(find(fs, "torch-nccl-error"), nullptr);
}

TEST(NcclLogWatchdog, PerRankFilesWithoutPrefixesAreOneRankEach) {
  JobBuilder b;
  for (int r = 0; r < 4; ++r) {
    std::string text;
    auto line = [&](const std::string& m) {
      text += "[E1218 20:27:21.1 ProcessGroupNCCL.cpp:1] " + m + "\n";
    };
    if (r == 2) {
      line(pg(2) + numbers("NCCL Work update periodically: ", 41, 41));
    } else {
      line(timeout(r, 42));
      line(pg(r) + numbers(at_work(42), 42, 41));
      line("[Rank " + std::to_string(r) +
           "] To avoid data inconsistency, we are taking the "
           "entire process down.");
    }
    std::istringstream in(text);
    b.add_stream(in, "rank" + std::to_string(r) + ".log");
  }
  auto fs = find_problems(b.finish());
  const Finding* f = find(fs, "torch-watchdog-timeout");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->blamed, (Names{"rank 2"}));
  EXPECT_EQ(f->waiting, (Names{"rank 0", "rank 1", "rank 3"}));
}

TEST(NcclLogWatchdog, SequenceNumbersOfAnotherGroupAreNotCompared) {
  // PG 1 times out in collective 42; rank 2 is in it too. Its default group is far behind in
  // numbers (10), which says nothing about PG 1.
  std::string log = nccl_init();
  for (int r : {0, 1, 3})
    log += torch(r, timeout(r, 42, "ALLREDUCE")) +
           torch(r, pg(r, "1") + numbers(at_work(42), 42, 41)) +
           torch(r, pg(r) + numbers("NCCL Work update periodically: ", 10, 10), 'I');
  log += torch(2, pg(2) + numbers("NCCL Work update periodically: ", 10, 10), 'I') +
         torch(2, pg(2, "1") + numbers("NCCL Work update periodically: ", 42, 41), 'I');
  auto fs = find_problems(build(log));
  const Finding* f = find(fs, "torch-watchdog-timeout");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->blamed.empty()) << f->title;
  EXPECT_TRUE(has(f->title, "in process group 1")) << f->title;
  EXPECT_TRUE(has(f->title, "none is behind")) << f->title;
  EXPECT_EQ(f->waiting.back(), "rank 2 (no timeout logged)");
}

TEST(NcclLogWatchdog, AllRanksInTheCollectiveMeansNoneIsBehind) {
  std::string log = nccl_init();
  for (int r = 0; r < 4; ++r)
    log += torch(r, timeout(r, 42)) + torch(r, pg(r) + numbers(at_work(42), 44, 41));
  const Finding* f = nullptr;
  auto fs = find_problems(build(log));
  f = find(fs, "torch-watchdog-timeout");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->blamed.empty());
  EXPECT_EQ(f->waiting.size(), 4u);
  EXPECT_TRUE(has(f->title, "every rank had issued it: none is behind")) << f->title;
  EXPECT_TRUE(has(f->remedy, "NCCL WARN"));
}

TEST(NcclLogWatchdog, HealthyJobsOfTheHardKindHaveNoFinding) {
  std::string log = nccl_init();
  for (int r = 0; r < 4; ++r) {
    log += torch(r,
                 pg(r) + "ProcessGroupNCCL initialization options: size: 4, global rank: " +
                     std::to_string(r) + ", TIMEOUT(ms): 600000, USE_HIGH_PRIORITY_STREAM: 0",
                 'I');
    log += torch(r, "[Rank " + std::to_string(r) + "] NCCL watchdog thread started!", 'I');
  }
  for (int step = 0; step < 50; ++step)
    for (int r = 0; r < 4; ++r) {  // busy and skewed: rank 1 runs 2 collectives ahead
      long seq = 100 + step * 10 + (r == 1 ? 2 : 0);
      log += torch(r, pg(r) + numbers("NCCL Work update periodically: ", seq, seq - 1), 'I');
      log += torch(r, pg(r, "1") + numbers("NCCL Work update periodically: ", step, step), 'I');
    }
  for (int r = 0; r < 4; ++r)  // every rank at equal numbers at the end
    log += torch(r, pg(r) + numbers("NCCL Work update periodically: ", 600, 600), 'I') +
           torch(r,
                 pg(r) +
                     "main process destroyed cuda before watchdog loop exited, terminating "
                     "watchdog. (Watchdog caught exception: CUDA driver error: driver "
                     "shutting down",
                 'I');
  // A gpudiag report quoting a timeout, appended to the output by `check --nccl-debug`.
  log += "  log:  old.log:12: [rank0]:[E1218 20:27:21.4 ProcessGroupNCCL.cpp:629] " +
         timeout(0, 9) + "\n";
  Job job = build(log);
  EXPECT_GT(job.torch_lines, 400u);
  auto fs = find_problems(job);
  for (const auto& f : fs) ADD_FAILURE() << f.id << ": " << f.title;
}

TEST(NcclLogWatchdog, AnErrorThatTookARankDownIsBlamed) {
  std::string log = nccl_init();
  log += torch(2, pg(2) +
                      "Process group watchdog thread terminated with exception: CUDA error: "
                      "an illegal memory access was encountered") +
         take_down(2);
  auto fs = find_problems(build(log));
  const Finding* f = find(fs, "torch-nccl-error");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->blamed, (Names{"rank 2"}));
  EXPECT_TRUE(has(f->title, "illegal memory access")) << f->title;
  EXPECT_TRUE(has(f->remedy, "CUDA_LAUNCH_BLOCKING=1"));
  EXPECT_EQ(find(fs, "torch-watchdog-timeout"), nullptr);
  // Torch 2.1 in a shared file: the take-down lines name no rank, the watchdog's line does.
  fs = find_problems(build(
      nccl_init() +
      "[E ProcessGroupNCCL.cpp:481] Some NCCL operations have failed or timed out. Due to the "
      "asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
      "corrupted/incomplete data.\n"
      "[E ProcessGroupNCCL.cpp:487] To avoid data inconsistency, we are taking the entire process "
      "down.\n"
      "[E ProcessGroupNCCL.cpp:852] [Rank 3] NCCL watchdog thread terminated with exception: NCCL "
      "error: remote process exited or there was a network error, NCCL version 2.19.3\n"));
  f = find(fs, "torch-nccl-error");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->blamed, (Names{"rank 3"}));
  EXPECT_TRUE(has(f->remedy, "peer process died")) << f->remedy;
}

TEST(NcclLogWatchdog, AStuckWatchdogIsItsOwnFinding) {
  auto fs = find_problems(build(
      nccl_init() + torch(1, pg(1) + "Heartbeat monitor timed out! Process will be terminated "
                                     "after dumping debug info. workMetaList_.size()=0")));
  const Finding* f = find(fs, "torch-watchdog-stuck");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->who, (Names{"rank 1"}));
  EXPECT_TRUE(has(f->remedy, "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"));
}

TEST(NcclLogWatchdog, NcclDiagnosticsIssues) {
  auto fs =
      find_problems(build(
          nccl_init() + "NCCL DIAG === NCCL Diagnostics ===\n"
                        "NCCL DIAG [OK] net bw: skipped (single host or no network transport)\n"
                        "NCCL DIAG [INFO] p2p: write mismatch srcRank=0 srcCudaDev=0 srcNvmlDev=0 "
                        "dstRank=3 dstCudaDev=3 dstNvmlDev=3 path=PXB handle=CUMEM_POSIX_FD "
                        "expected=0x1 got=0x0 verify=0x0; check the affected pair\n"
                        "NCCL DIAG [INFO] p2p: only 54/56 GPU-to-GPU peer accesses passed "
                        "verification\n"
                        "NCCL DIAG NCCL diagnostics completed in 245.3 ms across 4 ranks\n"));
  const Finding* f = find(fs, "nccl-diag");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::problem);
  EXPECT_TRUE(has(f->title, "write mismatch srcRank=0")) << f->title;
  EXPECT_EQ(f->evidence.size(), 2u);
  // A check that could not run is a note, and a clean report is nothing.
  fs = find_problems(build(nccl_init() + "NCCL DIAG [INFO] net bw: required external tool "
                                         "missing in comm 0x5f3a\n"));
  f = find(fs, "nccl-diag");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::note);
  EXPECT_FALSE(has_problem(fs));
  fs = find_problems(build(nccl_init() + "NCCL DIAG [OK]   p2p: verified P2P access in both "
                                         "directions between every GPU pair (12 peer accesses)\n"));
  EXPECT_EQ(find(fs, "nccl-diag"), nullptr);
}

}  // namespace
}  // namespace gpudiag::nccl_log
