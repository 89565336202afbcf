// The expected-bandwidth table and its verdicts: every compiled-in file
// parses, the names CUDA reports find their family, recorded results from
// published nccl-tests runs get the verdict a reader would give them, and the
// job-level helpers pick the figure a user would (slowest rank, largest size,
// slowest link of each class, the host's NIC rate from a captured sysfs tree).
#include "report/expected_bw.h"

#include <gtest/gtest.h>

#include "report/expected_bw_job.h"
#include "util/error.h"

namespace gpudiag {
namespace {

const std::string kSys = std::string(GPUDIAG_TEST_DATA) + "/sysfs/";

BwMeasurement allreduce(const std::string& gpu, double gbps, bool across = false) {
  BwMeasurement m;
  m.gpu_name = gpu;
  m.backend = "nccl";
  m.across_nodes = across;
  m.bytes = 1ull << 30;
  m.gbps = gbps;
  return m;
}

TEST(ExpectedBwTable, EveryFileParsesAndCoversTheFamiliesAsked) {
  const auto& t = expected_bw_table();
  ASSERT_GE(t.size(), 6u);
  for (const auto& f : t) {
    EXPECT_FALSE(f.intra_source.empty()) << f.file;
    EXPECT_GT(f.judged_from_bytes, 0u) << f.file;
    for (const auto& n : f.inter) EXPECT_FALSE(n.source.empty()) << f.file;
  }
}

TEST(ExpectedBwTable, NamesAsCudaReportsThemFindOneFamily) {
  const auto& t = expected_bw_table();
  const std::pair<const char*, const char*> names[] = {{"NVIDIA A100-SXM4-80GB", "A100 SXM"},
                                                       {"NVIDIA A100-SXM4-40GB", "A100 SXM"},
                                                       {"NVIDIA A100-SXM-80GB", "A100 SXM"},
                                                       {"NVIDIA A100-PCIE-40GB", "A100 PCIe"},
                                                       {"NVIDIA A100 80GB PCIe", "A100 PCIe"},
                                                       {"NVIDIA H100 80GB HBM3", "H100 SXM"},
                                                       {"NVIDIA H100 PCIe", "H100 PCIe"},
                                                       {"NVIDIA H200", "H200 SXM"},
                                                       {"NVIDIA B200", "B200"},
                                                       {"NVIDIA B300 SXM6 AC", "B300"},
                                                       {"NVIDIA GB200", "GB200 NVL"},
                                                       {"NVIDIA GB300", "GB300 NVL"}};
  for (const auto& [name, family] : names) {
    const GpuFamily* f = find_family(t, name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f->family, family) << name;
    int matching = 0;  // one file per name: a second match would be ambiguous
    for (const auto& g : t) matching += find_family({g}, name) != nullptr;
    EXPECT_EQ(matching, 1) << name;
  }
  for (const char* other : {"NVIDIA GH200 480GB", "NVIDIA H100 NVL",
                            "NVIDIA H200 NVL", "NVIDIA GeForce RTX 4090", "Tesla V100-SXM2-32GB"})
    EXPECT_EQ(find_family(t, other), nullptr) << other;
}

TEST(ExpectedBwVerdict, PublishedSingleNodeResults) {
  const auto& t = expected_bw_table();
  // 8x H200, NVLink SHARP, 475 GB/s (nccl-tests issue 272): well above.
  auto v = judge_bandwidth(allreduce("NVIDIA H200", 475), t);
  EXPECT_EQ(v.verdict, "PASS");
  EXPECT_EQ(v.expected_gbps, 360);
  EXPECT_EQ(v.file, "data/expected-bw/h200.json");
  // 8x H100 at 250 GB/s (nccl-tests issue 212's question): 69%, a warning.
  v = judge_bandwidth(allreduce("NVIDIA H100 80GB HBM3", 250), t);
  EXPECT_EQ(v.verdict, "WARN");
  EXPECT_EQ(v.percent, 69);
  // 8x A100 SXM at 232.5 GB/s (nccl-tests issue 175): passes; 20 GB/s
  // (issue 178's three-thread run) fails.
  EXPECT_EQ(judge_bandwidth(allreduce("NVIDIA A100-SXM4-80GB", 232.54), t).verdict, "PASS");
  v = judge_bandwidth(allreduce("NVIDIA A100-SXM4-80GB", 20), t);
  EXPECT_EQ(v.verdict, "FAIL");
  EXPECT_TRUE(v.failed());
  EXPECT_EQ(v.text,
            "Expected bus bandwidth : 225 GB/s (A100 SXM, NVLink 3 through NVSwitch (12 links, "
            "300 GB/s each way), one node; source data/expected-bw/a100-sxm.json) measured "
            "20.0: FAIL (9%)");
}

TEST(ExpectedBwVerdict, ThresholdsAreEightyAndFiftyPercent) {
  const auto& t = expected_bw_table();
  EXPECT_EQ(judge_bandwidth(allreduce("NVIDIA H100 80GB HBM3", 288), t).verdict, "PASS");
  EXPECT_EQ(judge_bandwidth(allreduce("NVIDIA H100 80GB HBM3", 287.9), t).verdict, "WARN");
  EXPECT_EQ(judge_bandwidth(allreduce("NVIDIA H100 80GB HBM3", 180), t).verdict, "WARN");
  EXPECT_EQ(judge_bandwidth(allreduce("NVIDIA H100 80GB HBM3", 179.9), t).verdict, "FAIL");
}

TEST(ExpectedBwVerdict, AcrossNodesByNicRateAndCount) {
  const auto& t = expected_bw_table();
  // 2 HGX H100 nodes with 8x 400G each, 470 GB/s (nccl-tests issue 309): the
  // NICs (8 x 45) exceed NVLink's figure, so the node's figure holds.
  auto m = allreduce("NVIDIA H100 80GB HBM3", 470, true);
  m.rdma_rate_gbps = 400;
  m.rdma_ports = 8;
  auto v = judge_bandwidth(m, t);
  EXPECT_EQ(v.verdict, "PASS");
  EXPECT_EQ(v.expected_gbps, 360);
  // 4x 200G on A100 nodes, 86 GB/s (nccl-tests issue 175): 4 x 24 = 96, 90%.
  m = allreduce("NVIDIA A100-SXM4-80GB", 86, true);
  m.rdma_rate_gbps = 200;
  m.rdma_ports = 4;
  v = judge_bandwidth(m, t);
  EXPECT_EQ(v.expected_gbps, 96);
  EXPECT_EQ(v.verdict, "PASS");
  EXPECT_NE(v.basis.find("4x 200 Gb/s NICs a node"), std::string::npos) << v.basis;
  // A rate the file has no row for, and no RDMA port at all: no expectation.
  m.rdma_rate_gbps = 800;
  EXPECT_EQ(judge_bandwidth(m, t).verdict, "none");
  m.rdma_rate_gbps = 0;
  v = judge_bandwidth(m, t);
  EXPECT_EQ(v.verdict, "none");
  EXPECT_NE(v.text.find("pass --expect-busbw"), std::string::npos) << v.text;
}

// Blackwell: an NVL72 rack is one NVLink domain across its compute trays;
// HGX B300 has an 800G NIC per GPU. Published runs from coreweave/nccl-tests'
// README (NCCL 2.26.2): one rack of 72 GB200, and 20 racks over 400G NICs.
TEST(ExpectedBwVerdict, BlackwellRacksAndRails) {
  const auto& t = expected_bw_table();
  auto m = allreduce("NVIDIA GB200", 834.57, true);  // one rack, 8 GiB
  m.bytes = 8.0 * (1 << 30);
  m.one_nvlink_domain = true;
  m.rdma_rate_gbps = 400, m.rdma_ports = 4;  // the NICs do not apply within the domain
  auto v = judge_bandwidth(m, t);
  EXPECT_EQ(v.verdict, "PASS");
  EXPECT_EQ(v.expected_gbps, 650);
  EXPECT_NE(v.basis.find("several nodes of one NVLink domain"), std::string::npos) << v.basis;
  m.gbps = 300;  // a rack with a switch tray down
  EXPECT_EQ(judge_bandwidth(m, t).verdict, "FAIL");
  m.bytes = 512 << 20, m.gbps = 586.06;  // still rising at 512 MiB: from 1 GiB only
  EXPECT_EQ(judge_bandwidth(m, t).verdict, "no verdict");
  // 20 racks (1440 GPUs): across domains, 4x 400G a tray: 180, measured 405.74.
  m = allreduce("NVIDIA GB200", 405.74, true);
  m.bytes = 16.0 * (1 << 30);
  m.rdma_rate_gbps = 400, m.rdma_ports = 4;
  v = judge_bandwidth(m, t);
  EXPECT_EQ(v.verdict, "PASS");
  EXPECT_EQ(v.expected_gbps, 180);
  // HGX B300, 8x 800G: the NICs (8 x 85) pass NVLink's 650, which holds;
  // with two of the eight ports up, 170.
  m = allreduce("NVIDIA B300 SXM6 AC", 100, true);
  m.rdma_rate_gbps = 800, m.rdma_ports = 8;
  EXPECT_EQ(judge_bandwidth(m, t).expected_gbps, 650);
  m.rdma_ports = 2;
  v = judge_bandwidth(m, t);
  EXPECT_EQ(v.expected_gbps, 170);
  EXPECT_EQ(v.verdict, "WARN");
  // A family with no NVLink-domain figure says so rather than judging by NICs.
  m = allreduce("NVIDIA H100 80GB HBM3", 100, true);
  m.one_nvlink_domain = true;
  m.rdma_rate_gbps = 400, m.rdma_ports = 8;
  v = judge_bandwidth(m, t);
  EXPECT_EQ(v.verdict, "none");
  EXPECT_NE(v.source.find("one NVLink domain"), std::string::npos) << v.source;
}

TEST(ExpectedBwVerdict, UnknownHardwareOverrideHostAndSmallSizes) {
  const auto& t = expected_bw_table();
  auto v = judge_bandwidth(allreduce("NVIDIA Foo", 100), t);
  EXPECT_EQ(v.verdict, "none");
  EXPECT_EQ(v.text,
            "Expected bus bandwidth : no expectation for this hardware (NVIDIA Foo); pass "
            "--expect-busbw GB/s; measured 100.0");
  auto m = allreduce("NVIDIA Foo", 100);
  m.expect_override = 400;
  v = judge_bandwidth(m, t);
  EXPECT_EQ(v.verdict, "FAIL");
  EXPECT_EQ(v.basis, "--expect-busbw");
  // The host backends: never PASS, whatever the figure or the override.
  m = allreduce("", 1000);
  m.backend = "host/tcp";
  m.expect_override = 1;
  v = judge_bandwidth(m, t);
  EXPECT_EQ(v.verdict, "not applicable");
  EXPECT_NE(v.text.find("host memory"), std::string::npos) << v.text;
  // check's default 32 MiB: below where the figures hold, no verdict; the
  // override applies at any size.
  m = allreduce("NVIDIA H100 80GB HBM3", 100);
  m.bytes = 32 << 20;
  v = judge_bandwidth(m, t);
  EXPECT_EQ(v.verdict, "no verdict");
  EXPECT_NE(v.text.find("too small a size to judge"), std::string::npos) << v.text;
  m.expect_override = 90;
  EXPECT_EQ(judge_bandwidth(m, t).verdict, "PASS");
  // One rank moves nothing: no verdict either way.
  EXPECT_EQ(judge_bandwidth(allreduce("NVIDIA H100 80GB HBM3", 0), t).verdict, "not applicable");
}

TEST(ExpectedBwTable, MalformedFilesNameTheFileAndField) {
  const std::string good = R"({"family":"X","match":["x"],"exclude":[],"judged_from_bytes":1,
    "intra_node":{"fabric":"f","allreduce_busbw":1,"link_pair":1,"source":"s"},"inter_node":[]})";
  EXPECT_NO_THROW(parse_gpu_family("x.json", good));
  try {
    parse_gpu_family("x.json", R"({"family":"X","match":["x"],"exclude":[]})");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.json: no field \"judged_from_bytes\""),
              std::string::npos)
        << e.what();
  }
  std::string negative = good;
  negative.replace(negative.find("\"allreduce_busbw\":1"), 19, "\"allreduce_busbw\":-5");
  EXPECT_THROW(parse_gpu_family("x.json", negative), Error);
  EXPECT_THROW(parse_gpu_family("x.json", "not json"), Error);
  std::string domain = good;
  domain.insert(domain.size() - 1, R"(,"nvlink_domain":[1])");
  try {
    parse_gpu_family("x.json", domain);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.json: \"nvlink_domain\" is not an object"),
              std::string::npos)
        << e.what();
  }
  domain = good;
  domain.insert(domain.size() - 1, R"(,"nvlink_domain":{"fabric":"f","allreduce_busbw":2,
    "link_pair":2,"source":"s"})");
  EXPECT_THROW(parse_gpu_family("x.json", domain), Error);  // no judged_from_bytes
}

TEST(ExpectedBwJob, RdmaRateFromCapturedSysfs) {
  auto r = summarize_rdma(read_ib_ports(kSys + "ib_up"));
  EXPECT_EQ(r.rate_gbps, 200);
  EXPECT_EQ(r.ports, 2);
  // The DOWN port counts at the ACTIVE one's rate: a finding, not a lower bar.
  r = summarize_rdma(read_ib_ports(kSys + "ib_down"));
  EXPECT_EQ(r.ports, 2);
  EXPECT_EQ(r.down, 1);
  EXPECT_EQ(summarize_rdma(read_ib_ports(kSys + "none")).ports, 0);
}

CheckResult job(int ranks, int per_host, const std::string& gpu, const std::string& backend) {
  CheckResult res;
  res.me.backend = backend;
  for (int r = 0; r < ranks; ++r) {
    RankRecord rec;
    rec.rank = r;
    rec.host = "node" + std::to_string(r / per_host);
    rec.gpu_name = gpu;
    rec.backend = backend;
    res.table.push_back(rec);
  }
  return res;
}

TEST(ExpectedBwJob, CheckJudgesTheSlowestRanksAllReduce) {
  auto res = job(8, 8, "NVIDIA H100 80GB HBM3", "nccl");
  for (auto& r : res.table) r->allreduce_bytes = 1 << 30, r->allreduce_seconds = 0.005;
  res.table[5]->allreduce_seconds = 0.01;  // busbw 1.073741824 GB * 1.75 / 0.01 = 187.9
  auto v = check_busbw_verdict(res, std::nullopt, kSys + "none");
  EXPECT_EQ(v.verdict, "WARN");
  EXPECT_NEAR(v.measured_gbps, 187.9, 0.1);
  // The host backend's check: does not apply.
  auto host = job(2, 2, "", "host/tcp");
  for (auto& r : host.table) r->allreduce_bytes = 1 << 30, r->allreduce_seconds = 0.5;
  EXPECT_EQ(check_busbw_verdict(host, std::nullopt, kSys + "none").verdict, "not applicable");
}

// Four ranks on one GPU (NCCL_HOSTID per rank, as on a one-GPU test machine):
// the NVLink figure of a node of four GPUs does not apply, and the verdict says why.
TEST(ExpectedBwJob, RanksSharingAGpuGetNoVerdict) {
  auto res = job(4, 4, "NVIDIA H100 80GB HBM3", "nccl");
  for (auto& r : res.table) r->gpu_uuid = "GPU-1", r->gpu_bus_id = "0000:00:06.0";
  auto v = sweep_busbw_verdict(res, 256 << 20, 0.62, std::nullopt, kSys + "none");
  EXPECT_EQ(v.verdict, "not applicable");
  EXPECT_NE(v.text.find("ranks 0-3 share GPU 0000:00:06.0 on node0"), std::string::npos) << v.text;
  EXPECT_FALSE(v.failed());
  // Each rank its own GPU: judged as before.
  for (int r = 0; r < 4; ++r) res.table[r]->gpu_uuid = "GPU-" + std::to_string(r);
  EXPECT_EQ(sweep_busbw_verdict(res, 256 << 20, 0.62, std::nullopt, kSys + "none").verdict, "FAIL");
}

// Two compute trays of one NVL72 rack: the same NVLink cluster and clique on
// every rank puts the job in one domain; one rank elsewhere takes it out.
TEST(ExpectedBwJob, OneNvlinkDomainAcrossTrays) {
  auto res = job(8, 4, "NVIDIA GB200", "nccl");
  for (auto& r : res.table)
    r->allreduce_bytes = 1 << 30, r->allreduce_seconds = 0.0025,
    r->nvlink_domain = "0123456789abcdef0123456789abcdef/7";
  auto v = check_busbw_verdict(res, std::nullopt, kSys + "ib_up");  // 1.07 * 1.75 / 0.0025 = 751.6
  EXPECT_EQ(v.verdict, "PASS");
  EXPECT_EQ(v.expected_gbps, 650);
  res.table[5]->nvlink_domain = "0123456789abcdef0123456789abcdef/8";  // another clique
  v = check_busbw_verdict(res, std::nullopt, kSys + "ib_up");
  EXPECT_EQ(v.expected_gbps, 0);  // GB200 has no 200G row: no figure across domains
  EXPECT_EQ(v.verdict, "none");
  res.table[5]->nvlink_domain.clear();  // a GPU in no domain
  EXPECT_EQ(check_busbw_verdict(res, std::nullopt, kSys + "ib_up").verdict, "none");
}

TEST(ExpectedBwJob, SweepJudgesTheLargestSize) {
  auto res = job(16, 8, "NVIDIA A100-SXM4-80GB", "nccl");
  // 2 hosts, 2x 200G ports (ib_up): 48 GB/s; busbw 1.074 * 1.875 / 0.025 = 80.5.
  auto v = sweep_busbw_verdict(res, 1 << 30, 80.5, std::nullopt, kSys + "ib_up");
  EXPECT_EQ(v.expected_gbps, 48);
  EXPECT_EQ(v.verdict, "PASS");
  EXPECT_NEAR(v.measured_gbps, 80.5, 0.1);
}

TEST(ExpectedBwJob, LinksJudgeTheSlowestPairOfEachClass) {
  auto res = job(4, 2, "NVIDIA H100 80GB HBM3", "nccl");
  for (auto& r : res.table) r->link_bytes = 1 << 30;
  LinkVerdict links;
  links.links = {{0, 1, 350, true, false},
                 {2, 3, 100, true, true},
                 {0, 2, 23, false, false},
                 {1, 3, 22, false, false}};
  auto v = link_bw_verdicts(res, links, std::nullopt, kSys + "ib_up");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].verdict, "FAIL");  // 100 of 360 on one host
  EXPECT_NE(v[0].text.find("rank 2 <-> rank 3"), std::string::npos) << v[0].text;
  EXPECT_EQ(v[1].verdict, "PASS");  // 22 of 24 across hosts (200G ports)
  EXPECT_EQ(v[1].expected_gbps, 24);
}

// Two 8-GPU H100 nodes with 8x 400G InfiniBand and a 400G RoCE storage port
// (tests/data/sysfs/ib_8x400_storage): the storage port never counts, and a
// job drives at most one NIC per GPU it has on a node, judged by its host with
// the fewest. 1, 2 and 8 GPUs a node: 45, 90 and 360 GB/s (8 x 45 = 360, the
// NVLink figure, is the lower).
TEST(ExpectedBwJob, AcrossNodesCountsTheNicsTheJobsGpusCanUse) {
  const std::string sys = kSys + "ib_8x400_storage";
  EXPECT_EQ(summarize_rdma(read_ib_ports(sys)).ports, 9);  // the ninth DOWN: counted, named
  EXPECT_EQ(summarize_rdma(read_ib_ports(sys)).down, 1);
  EXPECT_EQ(summarize_rdma(read_ib_ports(sys)).rate_gbps, 400);
  for (auto [per_node, want] : {std::pair{1, 45.0}, {2, 90.0}, {8, 360.0}}) {
    auto res = job(2 * per_node, per_node, "NVIDIA H100 80GB HBM3", "nccl");
    for (auto& r : res.table) r->gpu_uuid = "GPU-" + std::to_string(r->rank);
    auto v = sweep_busbw_verdict(res, 4.0 * (1 << 30), want * 0.9, std::nullopt, sys, "");
    EXPECT_EQ(v.expected_gbps, want) << per_node << " GPUs a node: " << v.text;
    EXPECT_EQ(v.verdict, "PASS") << v.text;
  }
  // The srun -N2 --ntasks-per-node=1 case the old rule failed: 48 GB/s is healthy.
  auto one = job(2, 1, "NVIDIA H100 80GB HBM3", "nccl");
  auto v = sweep_busbw_verdict(one, 4.0 * (1 << 30), 48, std::nullopt, sys, "");
  EXPECT_EQ(v.verdict, "PASS") << v.text;
  EXPECT_NE(v.text.find("1 of 9x 400 Gb/s NICs a node (1 GPU a node in the job); 1 of them DOWN"),
            std::string::npos) << v.text;
  // Uneven hosts, 8 GPUs on one and 2 on the other: the host of 2 drives 2
  // NICs, so 85 GB/s is healthy against 90 (not 24% of 360).
  auto uneven = job(10, 8, "NVIDIA H100 80GB HBM3", "nccl");
  for (auto& r : uneven.table) r->gpu_uuid = "GPU-" + std::to_string(r->rank);
  v = sweep_busbw_verdict(uneven, 4.0 * (1 << 30), 85, std::nullopt, sys, "");
  EXPECT_EQ(v.expected_gbps, 90) << v.text;
  EXPECT_EQ(v.verdict, "PASS") << v.text;
}

// Across nodes 256 MiB is too small to judge (the pair is far below its
// asymptote there); from 1 GiB it is judged.
TEST(ExpectedBwJob, AcrossNodesIsJudgedFromAGibibyte) {
  auto res = job(16, 8, "NVIDIA H100 80GB HBM3", "nccl");
  const std::string sys = kSys + "ib_8x400_storage";
  EXPECT_EQ(sweep_busbw_verdict(res, 256 << 20, 100, std::nullopt, sys, "").verdict, "no verdict");
  EXPECT_EQ(sweep_busbw_verdict(res, 1 << 30, 100, std::nullopt, sys, "").verdict, "FAIL");
  // One node: still judged from the family's 256 MiB.
  EXPECT_EQ(sweep_busbw_verdict(job(8, 8, "NVIDIA H100 80GB HBM3", "nccl"), 256 << 20, 340,
                                std::nullopt, sys, "")
                .verdict,
            "PASS");
}

// NCCL_IB_HCA as NCCL reads it (src/transport/net_ib.cc, src/misc/utils.cc
// matchIfList): prefixes, '=' exact names, '^' exclusion, ':port'.
TEST(ExpectedBwJob, NcclIbHcaPicksThePortsNcclUses) {
  EXPECT_TRUE(nccl_hca_allows("", "mlx5_0", 1));
  EXPECT_TRUE(nccl_hca_allows("mlx5", "mlx5_10", 1));
  EXPECT_TRUE(nccl_hca_allows("mlx5_1", "mlx5_10", 1));  // a prefix, as NCCL matches it
  EXPECT_FALSE(nccl_hca_allows("=mlx5_1", "mlx5_10", 1));
  EXPECT_TRUE(nccl_hca_allows("=mlx5_1:1", "mlx5_1", 1));
  EXPECT_FALSE(nccl_hca_allows("=mlx5_1:2", "mlx5_1", 1));
  EXPECT_FALSE(nccl_hca_allows("^mlx5_8", "mlx5_8", 1));
  EXPECT_TRUE(nccl_hca_allows("^mlx5_8", "mlx5_0", 1));
  EXPECT_FALSE(nccl_hca_allows("^=mlx5_0,mlx5_1", "mlx5_1", 1));
  const auto ports = read_ib_ports(kSys + "ib_8x400_storage");
  EXPECT_EQ(summarize_rdma(ports, "=mlx5_0,mlx5_1,mlx5_2,mlx5_3").ports, 4);
  EXPECT_EQ(summarize_rdma(ports, "^mlx5_0,mlx5_1").ports, 7);  // 6 ACTIVE, mlx5_9 DOWN
  // Only the storage port allowed: the RoCE port is then the fabric.
  EXPECT_EQ(summarize_rdma(ports, "=mlx5_8").ports, 1);
}

TEST(ExpectedBwJob, OneLineForTheSweepPrinter) {
  EXPECT_EQ(expected_busbw_line("NVIDIA H100 80GB HBM3", 1, 312.4, 1 << 30),
            "# Expected bus bandwidth : 360 GB/s (H100 SXM, NVLink 4 through NVSwitch (18 links, "
            "450 GB/s each way), one node; source data/expected-bw/h100-sxm.json) measured 312.4: "
            "PASS (87%)\n");
  EXPECT_EQ(expected_busbw_line("NVIDIA Foo", 1, 10, 1 << 30),
            "# Expected bus bandwidth : no expectation for this hardware (NVIDIA Foo); pass "
            "--expect-busbw GB/s; measured 10.0\n");
}

}  // namespace
}  // namespace gpudiag
