// Every form of PyTorch's ProcessGroupNCCL watchdog lines and NCCL's DIAG lines that
// side_line.h lists, one test per message, with the versions' prefixes (the lines are written as
// ProcessGroupNCCL.cpp and NCCL's diagnostics format them; sources in
// tests/fixtures/nccl_logs/SOURCES.md), and the healthy lines that share their words.
#include "nccl_log/side_line.h"

#include <gtest/gtest.h>

namespace gpudiag::nccl_log {
namespace {

SideLine must(std::string_view raw) {
  auto l = parse_side_line(raw);
  EXPECT_TRUE(l.has_value()) << raw;
  return l.value_or(SideLine{});
}

TEST(NcclLogSideLine, WatchdogTimeoutOfTorch2) {
  auto l = must(
      "[rank0]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught "
      "collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=131072000, "
      "NumelOut=131072000, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.");
  EXPECT_EQ(l.kind, SideKind::timeout);
  EXPECT_EQ(l.launcher_rank, 0);
  EXPECT_EQ(l.rank, 0);
  EXPECT_EQ(l.pg, "");
  EXPECT_EQ(l.seq, 1);
  EXPECT_EQ(l.op, "BROADCAST");
  EXPECT_EQ(l.timeout_ms, 600000);
  EXPECT_EQ(l.ran_ms, 600081);
}

TEST(NcclLogSideLine, WatchdogTimeoutOfTorch1) {
  // 1.13-2.1: no "[rankN]:" in front, glog's "[E FILE:LINE]" without a time.
  auto l = must(
      "[E ProcessGroupNCCL.cpp:458] [Rank 7] Watchdog caught collective operation "
      "timeout: WorkNCCL(SeqNum=64088, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for "
      "25625251 milliseconds before timing out.");
  EXPECT_EQ(l.launcher_rank, -1);
  EXPECT_EQ(l.rank, 7);
  EXPECT_EQ(l.seq, 64088);
  EXPECT_EQ(l.op, "ALLREDUCE");
  // Older 1.x: TensorShape (with its own commas) in place of the Numel fields.
  l = must(
      "[E ProcessGroupNCCL.cpp:566] [Rank 1] Watchdog caught collective operation timeout: "
      "WorkNCCL(SeqNum=3, OpType=ALLGATHER, TensorShape=[1, 2], Timeout(ms)=1800000) ran "
      "for 1800487 milliseconds before timing out.");
  EXPECT_EQ(l.seq, 3);
  EXPECT_EQ(l.timeout_ms, 1800000);
  // Older still: no SeqNum at all.
  l = must(
      "[E ProcessGroupNCCL.cpp:325] [Rank 2] Watchdog caught collective operation timeout: "
      "WorkNCCL(OpType=ALLREDUCE, TensorShape=[256], Timeout(ms)=10000) ran for 10013 "
      "milliseconds before timing out.");
  EXPECT_EQ(l.seq, -1);
  EXPECT_EQ(l.op, "ALLREDUCE");
  // The exception text as std::terminate prints it.
  l = must(
      "  what():  [Rank 124] Watchdog caught collective operation timeout: "
      "WorkNCCL(SeqNum=12626, OpType=_ALLGATHER_BASE, Timeout(ms)=600000) ran for 605485 "
      "milliseconds before timing out.");
  EXPECT_EQ(l.kind, SideKind::timeout);
  EXPECT_EQ(l.rank, 124);
  EXPECT_EQ(l.op, "_ALLGATHER_BASE");
}

TEST(NcclLogSideLine, RankPrefixAfterOtherPrefixes) {
  auto l = must(
      "[80746] [rank3]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 3] "
      "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, "
      "OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600060 "
      "milliseconds before timing out.");
  EXPECT_EQ(l.launcher_rank, 3);
  l = must(
      "slurm0-a3-ghpc-8: [rank17]:[E ProcessGroupNCCL.cpp:1182] [Rank 2] NCCL watchdog "
      "thread terminated with exception: [Rank 2] Watchdog caught collective operation "
      "timeout: WorkNCCL(SeqNum=4, OpType=ALLREDUCE, NumelIn=9437184, NumelOut=9437184, "
      "Timeout(ms)=600000) ran for 600070 milliseconds before timing out.");
  EXPECT_EQ(l.kind, SideKind::watchdog_error);
  EXPECT_EQ(l.launcher_rank, 17);
  EXPECT_EQ(l.rank, 2);  // in its group; the launcher's 17 is the global rank
  EXPECT_EQ(l.seq, 4);
  EXPECT_TRUE(is_timeout_text(l.detail));
}

TEST(NcclLogSideLine, BlockingWaitTimeout) {
  auto l = must(
      "[rank3]:[E ProcessGroupNCCL.cpp:800] [Rank 3] Work WorkNCCL(SeqNum=9, "
      "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=5000) timed out in "
      "blocking wait (NCCL_BLOCKING_WAIT=1).");
  EXPECT_EQ(l.kind, SideKind::blocking_timeout);
  EXPECT_EQ(l.seq, 9);
  EXPECT_EQ(l.timeout_ms, 5000);
}

TEST(NcclLogSideLine, SequenceNumbersOfEveryVersion) {
  // 2.3-2.5 "Timeout at NCCL work", "[PG N Rank R]" of 2.3.
  auto l = must(
      "[rank4]:[E1016 03:31:38.929234295 ProcessGroupNCCL.cpp:1709] [PG 3 Rank 4] "
      "Timeout at NCCL work: 9141, last enqueued NCCL work: 9141, last completed NCCL "
      "work: 9140.");
  EXPECT_EQ(l.kind, SideKind::seq_status);
  EXPECT_EQ(l.source, StatusSource::error);
  EXPECT_EQ(l.pg, "3");
  EXPECT_EQ(l.rank, 4);
  EXPECT_EQ(l.seq, 9141);
  EXPECT_EQ(l.enqueued, 9141);
  EXPECT_EQ(l.completed, 9140);
  // 2.4-2.6, "[PG ID N PG GUID G(desc) Rank R]" of 2.4+.
  l = must(
      "[rank1]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID "
      "0(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at "
      "work: 808, last enqueued NCCL work: 811, last completed NCCL work: 807.");
  EXPECT_EQ(l.pg, "0");
  EXPECT_EQ(l.pg_desc, "default_pg");
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(l.seq, 808);
  EXPECT_EQ(l.enqueued, 811);
  // 2.7+: one line for a timeout, one for an error.
  l = must(
      "[PG ID 2 PG GUID 3 Rank 0] Work timeout is detected by watchdog at work: 42, last "
      "enqueued NCCL work: 42, last completed NCCL work: 41.");
  EXPECT_EQ(l.pg, "2");
  EXPECT_EQ(l.seq, 42);
  EXPECT_EQ(l.source, StatusSource::error);
  l = must(
      "[PG ID 0 PG GUID 0(default_pg) Rank 0] NCCL error is detected by watchdog at work: "
      "7, last enqueued NCCL work: 9, last completed NCCL work: 6.");
  EXPECT_EQ(l.seq, 7);
  // 2.5+ heartbeat monitor on a rank that did not time out itself: "Last" and no "at work".
  l = must(
      "[rank2]:[E703 15:37:17.178360488 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID "
      "0(default_pg) Rank 2] Received a dump signal due to a collective timeout from  rank "
      "7 and we will try our best to dump the debug info. Last enqueued NCCL work: 41, last "
      "completed NCCL work: 41.This is most likely caused by incorrect usages of "
      "collectives, e.g., wrong sizes used across ranks.");
  EXPECT_EQ(l.source, StatusSource::dump);
  EXPECT_EQ(l.seq, -1);
  EXPECT_EQ(l.enqueued, 41);
  EXPECT_EQ(l.completed, 41);
  // No collective ever completed (or enqueued): -1 is a value, not "absent".
  l = must(
      "[PG ID 0 PG GUID 0(default_pg) Rank 0] Received a dump signal due to a collective "
      "timeout from this local rank and we will try our best to dump the debug info. Last "
      "enqueued NCCL work: 1, last completed NCCL work: -1.");
  EXPECT_TRUE(l.has_status);
  EXPECT_EQ(l.completed, -1);
  // 2.4+ periodic INFO.
  l = must(
      "[rank0]:[I1218 20:20:00.1 ProcessGroupNCCL.cpp:1800] [PG ID 0 PG GUID 0(default_pg) "
      "Rank 0] NCCL Work update periodically: last enqueued NCCL work: 500, last completed "
      "NCCL work: 500.");
  EXPECT_EQ(l.source, StatusSource::periodic);
}

TEST(NcclLogSideLine, FailureAndTakeDown) {
  auto l = must(
      "[rank4]:[E1016 03:31:38.929241154 ProcessGroupNCCL.cpp:621] [Rank 4] Some NCCL "
      "operations have failed or timed out. Due to the asynchronous nature of CUDA "
      "kernels, subsequent GPU operations might run on corrupted/incomplete data.");
  EXPECT_EQ(l.kind, SideKind::failed);
  EXPECT_EQ(l.rank, 4);
  l = must(
      "[E ProcessGroupNCCL.cpp:461] To avoid data inconsistency, we are taking the entire "
      "process down.");
  EXPECT_EQ(l.kind, SideKind::teardown);
  EXPECT_EQ(l.rank, -1);
  // Older 1.x handleNCCLGuard: both in one line.
  l = must(
      "[E ProcessGroupNCCL.cpp:325] Some NCCL operations have failed or timed out. Due to "
      "the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
      "corrupted/incomplete data. To avoid this inconsistency, we are taking the entire "
      "process down.");
  EXPECT_EQ(l.kind, SideKind::teardown);
}

TEST(NcclLogSideLine, WatchdogThreadErrors) {
  auto l = must(
      "[rank6]:[E628 09:54:15.886208728 ProcessGroupNCCL.cpp:2197] [PG ID 0 PG GUID "
      "0(default_pg) Rank 6] Process group watchdog thread terminated with exception: "
      "[Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=78, "
      "OpType=SCATTER, NumelIn=29360128, NumelOut=0, Timeout(ms)=1800000) ran for "
      "1800043 milliseconds before timing out.");
  EXPECT_EQ(l.kind, SideKind::watchdog_error);
  EXPECT_EQ(l.pg, "0");  // of the line, not of the quoted exception's "[Rank 6]"
  EXPECT_EQ(l.seq, 78);
  EXPECT_EQ(l.op, "SCATTER");
  l = must(
      "[E ProcessGroupNCCL.cpp:852] [Rank 16] NCCL watchdog thread terminated with "
      "exception: NCCL error: remote process exited or there was a network error, NCCL "
      "version 2.19.3");
  EXPECT_EQ(l.rank, 16);
  EXPECT_EQ(l.detail.rfind("NCCL error: remote process exited", 0), 0u) << l.detail;
  EXPECT_FALSE(is_timeout_text(l.detail));
  l = must(
      "[rank1]:[E ProcessGroupNCCL.cpp:1414] [PG 2 Rank 1] Process group watchdog thread "
      "terminated with exception: CUDA error: an illegal memory access was encountered");
  EXPECT_EQ(l.pg, "2");
  EXPECT_EQ(l.detail, "CUDA error: an illegal memory access was encountered");
}

TEST(NcclLogSideLine, HeartbeatMonitor) {
  for (std::string_view raw :
       {"[rank0]:[E1218 21:00:00.1 ProcessGroupNCCL.cpp:1400] [PG ID 0 PG GUID 0(default_pg) "
        "Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping debug "
        "info. workMetaList_.size()=1",
        "[E ProcessGroupNCCL.cpp:1300] [Rank 0] NCCL monitor thread timeout. Basically, this "
        "could be due to CUDA or NCCL calls being unexpectedly blocking",
        "[E ProcessGroupNCCL.cpp:1310] [Rank 0] monitoring thread detects no heartbeat and will "
        "finally kill the process! terminateProcessGroup_0 collectiveDebugInfoMode_0"}) {
    EXPECT_EQ(must(raw).kind, SideKind::heartbeat) << raw;
  }
}

TEST(NcclLogSideLine, NcclDiagnostics) {
  auto l = must("NCCL DIAG [INFO] p2p: only 52/56 GPU-to-GPU peer accesses passed verification");
  EXPECT_EQ(l.kind, SideKind::diag);
  EXPECT_TRUE(l.diag_issue);
  EXPECT_EQ(l.detail, "[INFO] p2p: only 52/56 GPU-to-GPU peer accesses passed verification");
  l = must(
      "[1,0]<stdout>:NCCL DIAG [OK]   p2p: verified P2P access in both directions between "
      "every GPU pair (56 peer accesses)");
  EXPECT_FALSE(l.diag_issue);
  EXPECT_FALSE(must("NCCL DIAG === NCCL Diagnostics ===").diag_issue);
  EXPECT_FALSE(must("NCCL DIAG NCCL diagnostics completed in 245.3 ms across 8 ranks").diag_issue);
  EXPECT_FALSE(parse_side_line("INFO: see the NCCL DIAG report above for details"));
}

TEST(NcclLogSideLine, HealthyLinesWithTheSameWordsAreNotMatched) {
  for (std::string_view raw : {
           "[rank0]:[I1218 20:17:20.101 ProcessGroupNCCL.cpp:913] [PG ID 0 PG GUID 0 Rank 0] "
           "ProcessGroupNCCL initialization options: size: 4, global rank: 0, TIMEOUT(ms): "
           "600000, USE_HIGH_PRIORITY_STREAM: 0",
           "[I ProcessGroupNCCL.cpp:835] [Rank 0] NCCL watchdog thread started!",
           "[I ProcessGroupNCCL.cpp:850] [Rank 0] NCCL watchdog thread terminated normally",
           "[rank0]:[I1218 20:40:00.5 ProcessGroupNCCL.cpp:1310] [PG ID 0 PG GUID 0(default_pg) "
           "Rank 0] main process destroyed cuda before watchdog loop exited, terminating "
           "watchdog. (Watchdog caught exception: CUDA driver error: driver shutting down",
           "[rank1]:[W1218 20:17:20.2 ProcessGroupNCCL.cpp:4115] [PG ID 0 PG GUID 0 Rank 1] "
           "using GPU 1 to perform barrier as devices used by this process are currently unknown.",
           "epoch 3 step 1200: loss 2.31, collective timeout set to 600 s, watchdog on",
           "node1:101:201 [0] NCCL INFO comm 0x1 rank 0 nranks 4 - Init COMPLETE",
       }) {
    EXPECT_FALSE(parse_side_line(raw)) << raw;
  }
}

}  // namespace
}  // namespace gpudiag::nccl_log
