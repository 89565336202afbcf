// The line grammar, on lines quoted from real logs (sources in
// tests/fixtures/nccl_logs/SOURCES.md).
#include "nccl_log/line.h"

#include <gtest/gtest.h>

namespace gpudiag::nccl_log {
namespace {

TEST(NcclLogLine, InfoWithHostPidTidDevice) {
  auto l = parse_line("ai:480850:480850 [0] NCCL INFO Bootstrap : Using eth0:162.30.2.40<0>");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->level, Level::info);
  EXPECT_EQ(l->host, "ai");
  EXPECT_EQ(l->pid, 480850);
  EXPECT_EQ(l->tid, 480850);
  EXPECT_EQ(l->device, 0);
  EXPECT_EQ(l->message, "Bootstrap : Using eth0:162.30.2.40<0>");
  EXPECT_TRUE(l->timestamp.empty());
  EXPECT_FALSE(l->legacy);
}

TEST(NcclLogLine, WarnWithTimestampSourceAndFunction) {
  auto l = parse_line(
      "[2026-08-24 17:57:25] definitley-not-a-banana:2274:2274 [0] allocator.cc:89 (ncclMemAlloc) "
      "NCCL WARN Cuda failure 205 'mapping of buffer object failed'");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->level, Level::warn);
  EXPECT_EQ(l->timestamp, "2026-08-24 17:57:25");
  EXPECT_EQ(l->host, "definitley-not-a-banana");
  EXPECT_EQ(l->source, "allocator.cc:89");
  EXPECT_EQ(l->function, "ncclMemAlloc");
  EXPECT_EQ(l->message, "Cuda failure 205 'mapping of buffer object failed'");
}

TEST(NcclLogLine, SubsecondTimestampFromNccl228) {
  auto l = parse_line(
      "[2026-11-22 09:18:22.054782] vm:11670:11670 [0] misc/cudawrap.cc:270 NCCL WARN Cuda failure "
      "'CUDA driver version is insufficient for CUDA runtime version'");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->timestamp, "2026-11-22 09:18:22.054782");
  EXPECT_EQ(l->pid, 11670);
  EXPECT_EQ(l->source, "misc/cudawrap.cc:270");
}

TEST(NcclLogLine, OpenMpiTagOutputPrefix) {
  auto l = parse_line(
      "[1,2]<stdout>:j63g01247:65:197 [0] NCCL INFO Bootstrap : Using bond0:11.158.237.10<0>");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->launcher, "[1,2]<stdout>:");
  EXPECT_EQ(l->launcher_rank, 2);
  EXPECT_EQ(l->host, "j63g01247");
  EXPECT_EQ(l->pid, 65);
  EXPECT_EQ(l->tid, 197);
}

TEST(NcclLogLine, OpenMpiPrefixOnBareVersionLine) {
  auto l = parse_line("[1,0]<stdout>:NCCL version 2.8.4+cuda11.2");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->level, Level::version);
  EXPECT_EQ(l->launcher_rank, 0);
  EXPECT_EQ(l->message, "NCCL version 2.8.4+cuda11.2");
  EXPECT_EQ(l->pid, -1);
}

TEST(NcclLogLine, TorchrunAndSrunPrefixes) {
  auto t = parse_line("[default3]:node7:311:311 [3] NCCL INFO Using network IB");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->launcher_rank, 3);
  EXPECT_EQ(t->host, "node7");
  auto r = parse_line("[rank12]:node7:311:311 [3] NCCL INFO Using network IB");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->launcher_rank, 12);
  auto s = parse_line(" 5: node7:311:311 [3] NCCL INFO Using network IB");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->launcher_rank, 5);
  EXPECT_EQ(s->launcher, "5:");
  auto stacked = parse_line("0: [default1]:node7:311:311 [1] NCCL INFO Using network IB");
  ASSERT_TRUE(stacked);
  EXPECT_EQ(stacked->launcher_rank, 1);  // the innermost launcher names the rank
  EXPECT_EQ(stacked->pid, 311);
}

TEST(NcclLogLine, OtherPrefixesAreSkipped) {
  auto ray = parse_line(
      "(pid=909608) z-pc:909608:910337 [0] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC "
      "handle : 217 peer access is not supported between these two devices");
  ASSERT_TRUE(ray);
  EXPECT_EQ(ray->host, "z-pc");
  EXPECT_EQ(ray->source, "transport/p2p.cc:238");
  auto pdsh = parse_line(
      "10.10.23.10: so-ucloud-10-10-23-10:1307367:1307586 [0] NCCL INFO proxy.cc:520 -> 5");
  ASSERT_TRUE(pdsh);
  EXPECT_EQ(pdsh->host, "so-ucloud-10-10-23-10");
  auto cloudwatch = parse_line(
      "  | 2024-11-28T07:42:14.532Z | algo-1:17774:17862 [1] NCCL INFO transport/net.cc:687 -> 3");
  ASSERT_TRUE(cloudwatch);
  EXPECT_EQ(cloudwatch->timestamp, "2024-11-28T07:42:14.532Z");
  EXPECT_EQ(cloudwatch->host, "algo-1");
  auto ansi = parse_line("[0m ip-172-31-0-137:14605:14673 [0] NCCL INFO Using network Socket");
  ASSERT_TRUE(ansi);
  EXPECT_EQ(ansi->host, "ip-172-31-0-137");
}

TEST(NcclLogLine, HostStrippedByTheReporter) {
  auto dev_only = parse_line(
      "[0] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by "
      "remote peer 10.10.1.3<36138>");
  ASSERT_TRUE(dev_only);
  EXPECT_EQ(dev_only->device, 0);
  EXPECT_EQ(dev_only->source, "misc/socket.cc:71");
  EXPECT_TRUE(dev_only->host.empty());
  auto pid_tid = parse_line("78244:78465 [0] NCCL INFO Using network Socket");
  ASSERT_TRUE(pid_tid);
  EXPECT_EQ(pid_tid->pid, 78244);
  EXPECT_EQ(pid_tid->tid, 78465);
  EXPECT_TRUE(pid_tid->host.empty());
}

TEST(NcclLogLine, LegacyFormsWithoutTheWordNccl) {
  auto info = parse_line("docker-100-88-66-138:19123:19123 [2] INFO NET/IB: [0] mlx4_0:2/RoCE ");
  ASSERT_TRUE(info);
  EXPECT_TRUE(info->legacy);
  EXPECT_EQ(info->level, Level::info);
  EXPECT_EQ(info->device, 2);
  EXPECT_EQ(info->message, "NET/IB: [0] mlx4_0:2/RoCE");
  auto warn = parse_line(
      "include/socket.h:344 WARN Socket creation failed : Address family not "
      "supported by protocol");
  ASSERT_TRUE(warn);
  EXPECT_EQ(warn->level, Level::warn);
  EXPECT_EQ(warn->source, "include/socket.h:344");
}

TEST(NcclLogLine, TraceAndCall) {
  auto trace =
      parse_line("node1:100:101 [0] 1234.567890 ncclProxyProgress:812 NCCL TRACE progress");
  ASSERT_TRUE(trace);
  EXPECT_EQ(trace->level, Level::trace);
  EXPECT_EQ(trace->source, "ncclProxyProgress:812");
  EXPECT_EQ(trace->device, 0);
  EXPECT_EQ(trace->pid, 100);
  auto call = parse_line("node1:100:100 NCCL CALL ncclCommInitRank(0x1,2,0x2,0,0)");
  ASSERT_TRUE(call);
  EXPECT_EQ(call->level, Level::call);
  EXPECT_EQ(call->host, "node1");
  EXPECT_EQ(call->device, -1);
}

TEST(NcclLogLine, GarbageIsNotAnNcclLine) {
  for (const char* junk :
       {"", "   ", "Traceback (most recent call last):",
        "INFO 09-12 23:40:47 utils.py:977] Found nccl from library libnccl.so.2",
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL "
        "version 2.10.3",
        "[1,1]<stdout>:probe: ncclCommInitRank returned [1,1]<stdout>:1[1,1]<stdout>:",
        "\x7f\x45\x4c\x46\x02\x01\x01", "NCCL", "NCCL INFO", "[rank0]:[W129 07:44:34.187] Warning",
        "I0820 14:27:21.482718 4030958 ProcessGroupNCCL.cpp:980] NCCL version: 2.25.1,"}) {
    EXPECT_FALSE(parse_line(junk)) << junk;
  }
}

TEST(NcclLogLine, TruncatedLinesStillParse) {
  auto l = parse_line("worker:101542:101934 [0] include/socket.h:403 NCCL WARN Connect to f");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->message, "Connect to f");
  auto cut = parse_line("nmyjs-202-75:24507:24702");
  EXPECT_FALSE(cut);
  auto crlf = parse_line("h:1:2 [0] NCCL INFO Using network IB\r");
  ASSERT_TRUE(crlf);
  EXPECT_EQ(crlf->message, "Using network IB");
}

TEST(NcclLogChainStep, ParsesArrowAndThread) {
  auto s = parse_chain_step("group.cc:65 -> 2 [Async thread]");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->where, "group.cc:65");
  EXPECT_EQ(s->code, 2);
  EXPECT_EQ(s->thread, "Async thread");
  auto plain = parse_chain_step("misc/socket.cc:564 -> 2");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->thread, "");
  EXPECT_FALSE(parse_chain_step("Channel 00 : 0[0] -> 1[1] via P2P/IPC"));
  EXPECT_FALSE(parse_chain_step("init.cc:1226 -> x"));
}

TEST(NcclLogResultNames, KnownAndUnknown) {
  EXPECT_EQ(result_name(2), "ncclSystemError");
  EXPECT_EQ(result_name(6), "ncclRemoteError");
  EXPECT_EQ(result_name(42), "ncclResult 42");
}

}  // namespace
}  // namespace gpudiag::nccl_log
