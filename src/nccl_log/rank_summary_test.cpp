// Per-process facts read from real NCCL lines (sources in tests/fixtures/nccl_logs/SOURCES.md).
#include "nccl_log/rank_summary.h"

#include <gtest/gtest.h>

namespace gpudiag::nccl_log {
namespace {

ProcessSummary feed(std::initializer_list<const char*> lines) {
  ProcessSummary p;
  p.key = "test";
  std::size_t n = 0;
  for (const char* raw : lines) {
    auto line = parse_line(raw);
    EXPECT_TRUE(line) << raw;
    if (line) absorb(p, *line, "f.log", ++n, raw);
  }
  return p;
}

TEST(NcclLogInterfaces, ListsWithIndexIpv6AndAliases) {
  auto is = parse_interfaces(
      "[0]ens5:172.31.0.137<0> [1]veth75fa783:fe80::14ad:64ff:fe64:b31e%veth75fa783<0>");
  ASSERT_EQ(is.size(), 2u);
  EXPECT_EQ(is[0].name, "ens5");
  EXPECT_EQ(is[0].address, "172.31.0.137");
  EXPECT_EQ(is[1].name, "veth75fa783");
  EXPECT_TRUE(is_container_bridge(is[1]));
  EXPECT_FALSE(is_container_bridge(is[0]));
  auto one = parse_interfaces("lo:127.0.0.1<0>");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(is_loopback(one[0]));
  auto alias = parse_interfaces("eno1:avahi:xxx.xxx.xxx.xxx<0>");
  ASSERT_EQ(alias.size(), 1u);
  EXPECT_EQ(alias[0].name, "eno1");
}

TEST(NcclLogRankSummary, NetworkNicsPluginAndVersion) {
  auto p = feed({
      "hostname-test:983:1261 [3] NCCL INFO NET/IB : Using [0]mlx5_bond_1:1/RoCE "
      "[1]mlx5_bond_2:1/RoCE [RO]; OOB bond0:172.36.134.184<0>",
      "hostname-test:983:1261 [3] NCCL INFO Using network IBext_v8",
      "HGX-H100-04:589474:589541 [0] NCCL INFO Plugin Path : "
      "/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so",
      "HGX-H100-04:589474:589541 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using "
      "internal network plugin.",
      "h:1:1 [0] NCCL INFO NCCL version 2.19.3+cuda12.3",
  });
  EXPECT_EQ(p.ib_nics, (std::vector<std::string>{"mlx5_bond_1:1/RoCE", "mlx5_bond_2:1/RoCE"}));
  EXPECT_EQ(p.network, "IBext_v8");
  EXPECT_EQ(p.network_kind(), "plugin IBext_v8 (RoCE)");
  // A loaded external plugin is not overridden by a later "not found" for another name.
  EXPECT_EQ(p.net_plugin, "/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so");
  EXPECT_EQ(p.nccl_version, "2.19.3+cuda12.3");
}

TEST(NcclLogRankSummary, LegacyNetworkAndNics) {
  auto p = feed({
      "docker-100-88-66-138:19123:19123 [2] INFO NET : Using interface eth1:100.88.66.138<0>",
      "docker-100-88-66-138:19123:19123 [2] INFO NET/IB: [0] mlx4_0:2/RoCE ",
      "docker-100-88-66-138:19123:19123 [2] INFO Using internal Network IB",
      "docker-100-88-66-138:19123:19685 [2] INFO comm 0x2b8b20093600 rank 6 nranks 8",
  });
  ASSERT_EQ(p.bootstrap.size(), 1u);
  EXPECT_EQ(p.bootstrap[0].name, "eth1");
  EXPECT_EQ(p.ib_nics, (std::vector<std::string>{"mlx4_0:2/RoCE"}));
  EXPECT_EQ(p.network_kind(), "IB (RoCE)");
  EXPECT_EQ(p.rank(), 6);
  EXPECT_EQ(p.world_size(), 8);
  EXPECT_FALSE(p.init_complete());
}

TEST(NcclLogRankSummary, TransportsOldAndNewForms) {
  auto p = feed({
      "gpu2-ru7:2144:2556 [2] NCCL INFO Ring 00 : 2[3d000] -> 3[3e000] via direct shared memory",
      "ta1-1:2712:2824 [0] NCCL INFO Ring 00 : 0 -> 1 via NET/IB/0",
      "x:1:2 [0] NCCL INFO Channel 00 : 1[1e0] -> 0[1e0] [receive] via NET/Socket/0",
      "x:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 7[7] via P2P/CUMEM/read",
      "g148:14937:69361 [0] NCCL INFO Channel 01/1 : 0[0] -> 8[0] [send] via "
      "NET/IB/9/GDRDMA/Shared",
      "x:1:2 [0] NCCL INFO Channel 00/02 :    0   1",
  });
  EXPECT_EQ(p.transports.at("SHM/direct"), (std::set<int>{3}));
  EXPECT_EQ(p.transports.at("NET/IB"), (std::set<int>{1}));
  EXPECT_EQ(p.transports.at("NET/Socket"), (std::set<int>{1}));  // receive: the peer is the sender
  EXPECT_EQ(p.transports.at("P2P/CUMEM/read"), (std::set<int>{7}));
  EXPECT_EQ(p.transports.at("NET/IB/GDRDMA/Shared"), (std::set<int>{8}));
  EXPECT_EQ(p.transports.size(), 5u);
  EXPECT_TRUE(p.uses_net());
}

TEST(NcclLogRankSummary, CommunicatorsStartAndComplete) {
  auto p = feed({
      "VM:561:561 [0] NCCL INFO comm 0x1476dca0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 23000 "
      "commId 0xa015ae7e0a50005d - Init START",
      "VM:561:561 [0] NCCL INFO comm 0x1476dca0 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 "
      "MNNVL 0",
      // A collective trace names the comm too; it must not create or complete one.
      "VM:561:561 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 1 datatype 7 "
      "op 0 root 0 comm 0x99999 [nranks=2] stream 0x3",
  });
  ASSERT_EQ(p.comms.size(), 1u);
  const auto& c = p.comms.at("0x1476dca0");
  EXPECT_TRUE(c.started);
  EXPECT_FALSE(c.complete);
  EXPECT_EQ(c.nnodes, 2);
  EXPECT_EQ(c.bus_id, "23000");
  EXPECT_FALSE(p.init_complete());
  absorb(p,
         *parse_line("VM:561:600 [0] NCCL INFO comm 0x1476dca0 rank 0 nranks 2 cudaDev 0 "
                     "nvmlDev 0 busId 23000 commId 0xa015ae7e0a50005d - Init COMPLETE"),
         "f.log", 9, "");
  EXPECT_TRUE(p.init_complete());
  EXPECT_EQ(p.label(), "rank 0 (test)");
}

TEST(NcclLogRankSummary, WarningsCollectTheirChainByThread) {
  auto p = feed({
      "ubuntu:9621:9688 [3] misc/shmutils.cc:112 NCCL WARN Error while creating shared memory "
      "segment /dev/shm/nccl-KWfVyt (size 5967872)",
      "ubuntu:9621:9691 [6] misc/shmutils.cc:71 NCCL WARN Error: failed to extend "
      "/dev/shm/nccl-fjwOOB to 5967876 bytes",
      "ubuntu:9621:9688 [3] NCCL INFO transport/shm.cc:114 -> 2",
      "ubuntu:9621:9688 [3] NCCL INFO group.cc:65 -> 2 [Async thread]",
      "ubuntu:9621:9691 [6] NCCL INFO transport/shm.cc:114 -> 2",
  });
  ASSERT_EQ(p.warnings.size(), 2u);
  ASSERT_EQ(p.warnings[0].chain.size(), 2u);
  EXPECT_EQ(p.warnings[0].chain[1].thread, "Async thread");
  EXPECT_EQ(p.warnings[1].chain.size(), 1u);
  EXPECT_EQ(p.warnings[0].where.line, 1u);
}

TEST(NcclLogRankSummary, EnvVerbsAndP2pDisabled) {
  auto p = feed({
      "axa:3048391:3048566 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.",
      "axa:3048391:3048566 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to lo",
      "ai:480850:480850 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
      "node155:3052669:3052713 [1] NCCL INFO P2P is disabled between connected GPUs 2 and 1. You "
      "can repress this message with NCCL_IGNORE_DISABLED_P2P=1.",
  });
  EXPECT_EQ(p.env.at("NCCL_IB_DISABLE"), "1");
  EXPECT_EQ(p.env.at("NCCL_SOCKET_IFNAME"), "lo");
  EXPECT_EQ(p.env_evidence.at("NCCL_SOCKET_IFNAME").line, 2u);
  EXPECT_TRUE(p.verbs_missing);
  EXPECT_EQ(p.p2p_disabled.size(), 1u);
}

}  // namespace
}  // namespace gpudiag::nccl_log
