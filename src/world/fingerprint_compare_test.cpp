// The job-wide comparison on synthetic fingerprints: 1, 2, 8 and 1024 ranks,
// the grouping and compression of ranks and hosts, each severity and each
// finding, and the review's JSON staying bounded.
#include "world/fingerprint_compare.h"

#include <gtest/gtest.h>

#include <functional>

namespace gpudiag {
namespace {

Fingerprint base() {
  Fingerprint f;
  f.fields = {{"kernel", "6.1.0"},        {"shm", std::to_string(8ull << 30)},
              {"memlock", "unlimited"},   {"gpu.model", "none"},
              {"nccl.version", "2.21.5"}, {"plugin.net", "not found"},
              {"env.NCCL_DEBUG", "WARN"}};
  return f;
}

/// `n` ranks, `per_host` a host ("node1", "node2", ...), each with `f(rank)`.
struct Job {
  std::vector<Fingerprint> prints;
  std::vector<RankPrint> view;
  Job(int n, int per_host, const std::function<void(int, Fingerprint&)>& f = {}) {
    prints.resize(n, base());
    for (int r = 0; r < n; ++r) {
      if (f) f(r, prints[r]);
      view.push_back({r, "node" + std::to_string(r / per_host + 1), &prints[r]});
    }
  }
};

TEST(FingerprintCompress, RanksAndHosts) {
  EXPECT_EQ(compress_ranks({0, 1, 2, 3, 5, 7, 8, 9}), "0-3,5,7-9");
  EXPECT_EQ(compress_ranks({4}), "4");
  EXPECT_EQ(compress_hosts({"a", "b"}), "a,b");
  EXPECT_EQ(compress_hosts({"a", "b", "c", "d", "e"}), "a,b,c +2 hosts");
  std::vector<int> every_other;
  for (int r = 0; r < 2048; r += 2) every_other.push_back(r);
  EXPECT_LT(compress_ranks(every_other).size(), 100u);  // long lists are cut
}

TEST(FingerprintCompare, OneRankHasNothingToDiffer) {
  Job job(1, 1);
  auto c = compare_fingerprints(job.view);
  EXPECT_TRUE(c.differences.empty());
  EXPECT_EQ(c.ranks, 1);
  EXPECT_NE(render_fingerprint(comparison_json(c)).find("agree on all 1 ranks"), std::string::npos);
}

TEST(FingerprintCompare, TwoRanksEnvDifferenceIsAWarningNamingBothGroups) {
  Job job(2, 1, [](int r, Fingerprint& f) {
    if (r == 1) f.fields["env.NCCL_SOCKET_IFNAME"] = "eth0";
  });
  auto c = compare_fingerprints(job.view);
  ASSERT_EQ(c.differences.size(), 1u);
  EXPECT_FALSE(c.differences[0].broken);
  EXPECT_EQ(difference_line(c.differences[0]),
            "NCCL_SOCKET_IFNAME differs between ranks: rank 0 [node1]: unset; "
            "rank 1 [node2]: NCCL_SOCKET_IFNAME=eth0");
  EXPECT_TRUE(broken_lines(c).empty());
}

TEST(FingerprintCompare, EightRanksPluginOnHalfIsBroken) {
  Job job(8, 4, [](int r, Fingerprint& f) {
    if (r >= 4) f.fields["plugin.net"] = "/opt/x/libnccl-net.so";
  });
  auto c = compare_fingerprints(job.view);
  ASSERT_EQ(c.differences.size(), 1u);
  EXPECT_TRUE(c.differences[0].broken);
  auto lines = broken_lines(c);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("ranks 0-3 [node1]: not found; ranks 4-7 [node2]: /opt/x/libnccl-net.so"),
            std::string::npos)
      << lines[0];
  const auto text = render_fingerprint(comparison_json(c));
  EXPECT_NE(text.find("BROKEN: the NCCL net plugin differs"), std::string::npos) << text;
}

TEST(FingerprintCompare, PluginAtTwoPathsIsOnlyAWarningAndNcclVersionIsBroken) {
  Job job(8, 4, [](int r, Fingerprint& f) {
    f.fields["plugin.net"] = r < 4 ? "/a/libnccl-net.so" : "/b/libnccl-net.so";
    if (r == 7) f.fields["nccl.version"] = "2.18.1";
  });
  auto c = compare_fingerprints(job.view);
  ASSERT_EQ(c.differences.size(), 2u);
  EXPECT_EQ(c.differences[0].field, "nccl.version");  // broken first
  EXPECT_TRUE(c.differences[0].broken);
  EXPECT_FALSE(c.differences[1].broken);
  EXPECT_NE(difference_line(c.differences[0])
                .find("ranks 0-6 [node1,node2]: 2.21.5; rank 7 [node2]: 2.18.1"),
            std::string::npos)
      << difference_line(c.differences[0]);
}

TEST(FingerprintCompare, HostFieldsTakeOneValuePerHostAndBusIdIsNotCompared) {
  Job job(8, 2, [](int r, Fingerprint& f) {
    f.fields["gpu.bus_id"] = std::to_string(r);
    if (r / 2 == 3) f.fields["kernel"] = "5.15.0";
  });
  auto c = compare_fingerprints(job.view);
  ASSERT_EQ(c.differences.size(), 1u);
  EXPECT_TRUE(c.differences[0].host_field);
  EXPECT_EQ(difference_line(c.differences[0]),
            "the kernel differs between hosts: ranks 0-5 [node1,node2,node3]: 6.1.0; "
            "ranks 6-7 [node4]: 5.15.0");
  EXPECT_EQ(c.hosts, 4);
}

TEST(FingerprintCompare, ThousandRanksManyGroupsStayBounded) {
  Job job(1024, 8, [](int r, Fingerprint& f) {
    f.fields["env.NCCL_IB_HCA"] = "mlx5_" + std::to_string(r % 16);  // 16 groups
    for (int k = 0; k < 20; ++k)
      if (r == 1000) f.fields["env.NCCL_ODD" + std::to_string(k)] = "1";
    if (r == 1023) f.fields["env.NCCL_SOCKET_IFNAME"] = "lo";
  });
  auto c = compare_fingerprints(job.view);
  EXPECT_EQ(c.ranks, 1024);
  EXPECT_EQ(c.hosts, 128);
  EXPECT_EQ(c.differences.size(), 22u);
  const auto j = comparison_json(c);
  EXPECT_LT(j.dump().size(), 32u << 10);
  EXPECT_EQ(j["more_differences"], 14);
  const auto text = render_fingerprint(j);
  EXPECT_NE(text.find("22 of"), std::string::npos) << text;
  EXPECT_NE(text.find("more groups"), std::string::npos) << text;
  // A loopback interface on one rank of a 128-host job is a finding, named.
  ASSERT_EQ(c.findings.size(), 1u);
  EXPECT_EQ(c.findings[0].ranks, std::vector<int>{1023});
  EXPECT_NE(c.findings[0].what.find("loopback"), std::string::npos);
}

TEST(FingerprintCompare, LongValuesAndHostNamesStillFitTheReview) {
  std::vector<Fingerprint> prints(64, base());
  std::vector<RankPrint> view;
  for (int r = 0; r < 64; ++r) {
    for (int k = 0; k < 40; ++k)
      prints[r].fields["env.NCCL_V" + std::to_string(k)] = std::string(250, 'a' + r % 26);
    prints[r].fields["env.NCCL_SOCKET_IFNAME"] = "lo" + std::string(250, 'x');
    view.push_back({r, std::string(5000, 'h') + std::to_string(r), &prints[r]});
  }
  const auto j = comparison_json(compare_fingerprints(view));
  EXPECT_LE(j.dump().size(), 24u << 10);
  EXPECT_EQ(j["differences"].size() + j["more_differences"].get<std::size_t>(), 40u);
  EXPECT_FALSE(render_fingerprint(j).empty());
}

TEST(FingerprintFindings, LoopbackOrDockerOnlyMattersAcrossHosts) {
  Job one_host(4, 4, [](int, Fingerprint& f) { f.fields["env.NCCL_SOCKET_IFNAME"] = "lo"; });
  EXPECT_TRUE(compare_fingerprints(one_host.view).findings.empty());
  Job two(4, 2, [](int, Fingerprint& f) { f.fields["env.NCCL_SOCKET_IFNAME"] = "=docker0"; });
  auto c = compare_fingerprints(two.view);
  ASSERT_EQ(c.findings.size(), 1u);
  EXPECT_NE(c.findings[0].what.find("docker"), std::string::npos);
  EXPECT_EQ(compress_ranks(c.findings[0].ranks), "0-3");
  Job excluded(4, 2,
               [](int, Fingerprint& f) { f.fields["env.NCCL_SOCKET_IFNAME"] = "^lo,docker"; });
  EXPECT_TRUE(compare_fingerprints(excluded.view).findings.empty());
}

TEST(FingerprintFindings, PortDownSmallShmAndLimitedMemlock) {
  Job job(4, 2, [](int r, Fingerprint& f) {
    f.fields["ib.mlx5_0/1"] =
        r < 2 ? "ACTIVE, 200 Gb/sec (4X HDR), InfiniBand" : "DOWN, 10 Gb/sec (4X SDR), InfiniBand";
    if (r >= 2) f.fields["shm"] = std::to_string(64ull << 20);
    if (r >= 2) f.fields["memlock"] = std::to_string(8ull << 20);
  });
  auto c = compare_fingerprints(job.view);
  std::string all;
  for (auto& f : c.findings) all += f.what + " @" + compress_ranks(f.ranks) + "\n";
  EXPECT_NE(all.find("port mlx5_0/1 is DOWN @2-3"), std::string::npos) << all;
  EXPECT_NE(all.find("/dev/shm is 64 MiB for 2 ranks on the host @2-3"), std::string::npos) << all;
  EXPECT_NE(all.find("memlock is limited (ulimit -l: 8 MiB) on a host with RDMA devices @2-3"),
            std::string::npos)
      << all;
  // One rank on a host: a small /dev/shm is fine; no RDMA: memlock does not matter.
  Job lone(1, 1, [](int, Fingerprint& f) {
    f.fields["shm"] = "1000";
    f.fields["memlock"] = "65536";
  });
  EXPECT_TRUE(compare_fingerprints(lone.view).findings.empty());
}

TEST(FingerprintCompare, FieldsThatDifferByDesignAreNotCompared) {
  Job job(4, 2, [](int r, Fingerprint& f) {
    f.fields["env.NCCL_DEBUG_FILE"] = "/tmp/nccl." + std::to_string(r) + ".log";
    f.fields["env.NCCL_HOSTID"] = "h" + std::to_string(r / 2);
    f.fields["nic.veth" + std::to_string(r) + ".mtu"] = "1500";
    f.fields["gpu.bus_id"] = std::to_string(r);
  });
  EXPECT_TRUE(compare_fingerprints(job.view).differences.empty());
}

TEST(FingerprintCompare, RanksWithoutAFingerprintAreLeftOut) {
  Job job(3, 3);
  job.prints[1].fields.clear();
  auto c = compare_fingerprints(job.view);
  EXPECT_EQ(c.ranks, 2);
  EXPECT_TRUE(c.differences.empty());
}

TEST(FingerprintRender, MalformedReviewIsSkippedNotFatal) {
  EXPECT_EQ(render_fingerprint(nlohmann::json()), "");
  EXPECT_EQ(render_fingerprint(nlohmann::json(3)), "");
  nlohmann::json j = {
      {"differences", {1, "x", {{"text", 5}}}}, {"findings", "nope"}, {"fields_compared", "many"}};
  EXPECT_NO_THROW(render_fingerprint(j));
}

TEST(FingerprintNvml, EccOrPersistenceDifferingIsAWarningUnknownIsSilent) {
  Job job(8, 4, [](int r, Fingerprint& f) {
    f.fields["gpu.persistence"] = r == 6 ? "disabled" : "enabled";
    f.fields["gpu.ecc"] = r == 2 ? "disabled" : r == 7 ? "unknown" : "enabled";
    f.fields["gpu.clock.sm"] = std::to_string(1000 + r);  // follows the load: not compared
    f.fields["gpu.clock.sm_max"] = "1980";
  });
  auto c = compare_fingerprints(job.view);
  ASSERT_EQ(c.differences.size(), 2u);
  for (const auto& d : c.differences) EXPECT_FALSE(d.broken);
  EXPECT_EQ(difference_line(c.differences[0]),
            "GPU ECC mode differs between ranks: ranks 0-1,3-6 [node1,node2]: enabled; "
            "rank 2 [node1]: disabled");
  EXPECT_NE(c.differences[0].remedy.find("nvidia-smi -e 1"), std::string::npos);
  EXPECT_EQ(difference_line(c.differences[1]),
            "GPU persistence mode differs between ranks: ranks 0-5,7 [node1,node2]: enabled; "
            "rank 6 [node2]: disabled");
  EXPECT_NE(c.differences[1].remedy.find("nvidia-smi -pm 1"), std::string::npos);
  // Where NVML is absent on some ranks only, nothing differs.
  Job partly(4, 2,
             [](int r, Fingerprint& f) { f.fields["gpu.ecc"] = r < 2 ? "unknown" : "enabled"; });
  EXPECT_TRUE(compare_fingerprints(partly.view).differences.empty());
}

TEST(FingerprintFindings, AcsRedirectingOnAMultiGpuHost) {
  const std::string on = "enabled on 0000:18:08.0 (SrcValid,ReqRedir,CmplRedir,UpstreamFwd)";
  Job job(8, 4, [&](int r, Fingerprint& f) {
    f.fields["pcie.acs"] = r < 4 ? on : "disabled (2 switch ports)";
    f.fields["gpu.count"] = "4";
  });
  auto c = compare_fingerprints(job.view);
  EXPECT_TRUE(c.differences.empty());  // the values name each GPU's own bridges
  ASSERT_EQ(c.findings.size(), 1u);
  EXPECT_NE(c.findings[0].what.find("ACS redirects peer-to-peer traffic"), std::string::npos);
  EXPECT_EQ(compress_ranks(c.findings[0].ranks), "0-3");
  EXPECT_NE(c.findings[0].remedy.find("iommu=pt"), std::string::npos);
  // One GPU on its host: nothing to redirect between.
  Job lone(2, 1, [&](int, Fingerprint& f) {
    f.fields["pcie.acs"] = on;
    f.fields["gpu.count"] = "1";
  });
  EXPECT_TRUE(compare_fingerprints(lone.view).findings.empty());
}

TEST(FingerprintFindings, RowRemappingAndEccChangePending) {
  Job job(4, 4, [](int r, Fingerprint& f) {
    f.fields["gpu.remapped_rows"] = r == 1   ? "0 correctable, 1 uncorrectable, pending"
                                    : r == 2 ? "0 correctable, 9 uncorrectable, failed"
                                             : "0 correctable, 0 uncorrectable";
    f.fields["gpu.ecc"] = r == 3 ? "disabled (enabled after reset)" : "enabled";
  });
  auto c = compare_fingerprints(job.view);
  std::string all;
  for (auto& f : c.findings) all += f.what + " @" + compress_ranks(f.ranks) + "\n";
  EXPECT_NE(all.find("row remapping pending (NVML) @1"), std::string::npos) << all;
  EXPECT_NE(all.find("row remapping failed (NVML) @2"), std::string::npos) << all;
  EXPECT_NE(all.find("ECC mode changes at its next reset (NVML) @3"), std::string::npos) << all;
}

// An NVL72 rack: each tray's GPUs share a domain (never compared: racks
// differ by design); one GPU still registering, one failed, one degraded.
TEST(FingerprintFindings, NvlinkFabricNotReadyOrDegraded) {
  Job job(8, 4, [](int r, Fingerprint& f) {
    f.fields["gpu.nvlink_domain"] = r == 1   ? "registering"
                                    : r == 2 ? "failed (NVML error 999)"
                                    : r < 4  ? "ab/7"
                                             : "ab/8";
    f.fields["gpu.nvlink_bw"] = r == 6 ? "degraded" : r == 7 ? "not reported" : "full";
  });
  auto c = compare_fingerprints(job.view);
  EXPECT_TRUE(c.differences.empty());
  std::string all;
  for (auto& f : c.findings) all += f.what + " @" + compress_ranks(f.ranks) + "\n";
  EXPECT_NE(all.find("has not finished joining its NVLink fabric (NVML fabric state): NCCL "
                     "cannot use multi-node NVLink on it yet @1"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("failed to join its NVLink fabric (NVML: failed (NVML error 999)) @2"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("fabric runs at degraded bandwidth (NVML fabric health) @6"),
            std::string::npos)
      << all;
  EXPECT_EQ(c.findings.size(), 3u) << all;
}

// NCCL_COMM_BLOCKING=1 and NCCL_COMM_ID are findings on the ranks that have
// them, worded as `gpudiag info` and the check word them (comm/nccl_env.h).
TEST(FingerprintCompare, NcclCommBlockingAndCommIdAreFindings) {
  Job job(4, 2, [](int r, Fingerprint& f) {
    if (r >= 2) f.fields["env.NCCL_COMM_BLOCKING"] = "1";
    if (r == 3) f.fields["env.NCCL_COMM_ID"] = "10.0.0.1:29500";
  });
  auto c = compare_fingerprints(job.view);
  std::string all;
  for (auto& f : c.findings) all += f.what + " @" + compress_ranks(f.ranks) + "\n";
  EXPECT_NE(all.find("NCCL_COMM_BLOCKING=1 makes every NCCL communicator blocking"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("set it to 0 for their own NCCL @2-3"), std::string::npos) << all;
  EXPECT_NE(all.find("NCCL_COMM_ID=10.0.0.1:29500 puts the bootstrap root"), std::string::npos)
      << all;
  EXPECT_NE(all.find("never share one root @3"), std::string::npos) << all;
  EXPECT_EQ(c.findings.size(), 2u) << all;
}

// A value held by a few hosts against the one most ranks hold is named on a
// drift line of its own; halves, or a value on many hosts, are not drift.
TEST(FingerprintCompare, AFewHostsOnAnotherValueAreNamedAsDrift) {
  Job job(64, 8, [](int r, Fingerprint& f) {
    if (r / 8 == 5) f.fields["kernel"] = "5.15.0";
    if (r == 9) f.fields["env.NCCL_ALGO"] = "Tree";
    if (r >= 32) f.fields["env.NCCL_DEBUG"] = "INFO";
  });
  auto c = compare_fingerprints(job.view);
  ASSERT_EQ(c.differences.size(), 3u);
  std::vector<std::string> drift;
  for (const auto& d : c.differences)
    for (auto& line : drift_lines(d)) drift.push_back(line);
  EXPECT_EQ(drift, (std::vector<std::string>{
                       "node2 (rank 9): NCCL_ALGO is Tree, not unset as on 63 other ranks",
                       "node6 (ranks 40-47): the kernel is 5.15.0, not 6.1.0 as on 56 other ranks"}));
  const auto text = render_fingerprint(comparison_json(c));
  EXPECT_NE(text.find("\ndrift: node6 (ranks 40-47): the kernel is 5.15.0"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace gpudiag
