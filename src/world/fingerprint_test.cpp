// The fingerprint's readers on captured sysfs trees (tests/data/sysfs), the
// loader-order library search on temporary directories, and the defensive
// reading of a peer's fingerprint.
#include "world/fingerprint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpudiag {
namespace {

namespace fs = std::filesystem;
const std::string kSys = std::string(GPUDIAG_TEST_DATA) + "/sysfs/";

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "gpudiag-fp-XXXXXX").string();
    path = mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
  std::string touch(const std::string& rel, const std::string& text = "x") const {
    fs::create_directories((path / rel).parent_path());
    std::ofstream(path / rel) << text;
    return (path / rel).string();
  }
};

TEST(FingerprintSysfs, InfinibandPortsUp) {
  auto p = read_ib_ports(kSys + "ib_up");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p["ib.mlx5_0/1"], "ACTIVE, 200 Gb/sec (4X HDR), InfiniBand");
  EXPECT_EQ(p["ib.mlx5_1/1"], "ACTIVE, 200 Gb/sec (4X HDR), InfiniBand");
}

TEST(FingerprintSysfs, InfinibandPortDown) {
  auto p = read_ib_ports(kSys + "ib_down");
  EXPECT_EQ(p["ib.mlx5_1/1"], "DOWN, 10 Gb/sec (4X SDR), InfiniBand");
}

TEST(FingerprintSysfs, RoceIsEthernetLinkLayer) {
  auto p = read_ib_ports(kSys + "roce");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p["ib.mlx5_bond_0/1"], "ACTIVE, 100 Gb/sec (2X HDR), Ethernet");
  EXPECT_EQ(read_nic_mtus(kSys + "roce")["nic.bond0.mtu"], "9000");
}

TEST(FingerprintSysfs, NoRdmaDevicesAndMissingRootAreEmptyNotErrors) {
  EXPECT_TRUE(read_ib_ports(kSys + "none").empty());
  EXPECT_EQ(read_nic_mtus(kSys + "none").size(), 2u);
  EXPECT_TRUE(read_ib_ports("/nonexistent-root").empty());
  EXPECT_TRUE(read_nic_mtus("/nonexistent-root").empty());
}

TEST(FingerprintSysfs, ValuesAreBoundedAndPrintable) {
  TempDir t;
  t.touch("class/net/eth0/mtu", std::string(10000, 'A') + "\x01\n");
  t.touch("class/net/bad name/mtu", "1500");  // not a name sysfs would use: skipped
  auto m = read_nic_mtus(t.path.string());
  ASSERT_EQ(m.size(), 1u);
  EXPECT_LE(m["nic.eth0.mtu"].size(), kMaxValueChars);
  for (int i = 0; i < 100; ++i)
    t.touch("class/infiniband/d" + std::to_string(i) + "/ports/1/state", "1: DOWN");
  EXPECT_LE(read_ib_ports(t.path.string()).size(), kMaxPorts);
}

TEST(FingerprintLibrary, LoaderOrderLdLibraryPathThenCacheThenDefaultDirs) {
  TempDir t;
  const auto in_path = t.touch("llp/libnccl-net.so");
  const auto in_cache = t.touch("cached/libnccl-net.so");
  const auto in_default = t.touch("deflt/libnccl-net.so");
  // An ld cache's string table holds full paths between NULs.
  std::string cache("glibc-ld.so.cache1.1\0\0\0libnccl-net.so\0", 39);
  cache += in_cache + std::string(1, '\0') + "/usr/lib/libnccl-net.so.2" + std::string(1, '\0');
  const auto cache_file = t.touch("ld.so.cache", cache);
  const std::vector<std::string> dirs = {(t.path / "deflt").string()};
  EXPECT_EQ(resolve_library("libnccl-net.so", (t.path / "llp").string(), cache_file, dirs),
            in_path);
  EXPECT_EQ(resolve_library("libnccl-net.so", "/nowhere", cache_file, dirs), in_cache);
  EXPECT_EQ(resolve_library("libnccl-net.so", "", "/no-cache", dirs), in_default);
  EXPECT_EQ(resolve_library("libnccl-net.so", "", "/no-cache", {}), "");
  EXPECT_EQ(resolve_library(in_default, "", "", {}), in_default);  // a path is taken as is
}

TEST(FingerprintLibrary, PluginsFollowNcclsNames) {
  TempDir t;
  t.touch("lib/libnccl-net-aws-ofi.so");
  FingerprintSources s;
  s.sys_root = kSys + "none";
  s.ld_cache = "/no-cache";
  s.default_dirs = {};
  s.read_process_limits = false;
  s.env.set("LD_LIBRARY_PATH", (t.path / "lib").string());
  EXPECT_EQ(collect_fingerprint(s).get("plugin.net"), "not found");
  s.env.set("NCCL_NET_PLUGIN", "aws-ofi");
  EXPECT_EQ(collect_fingerprint(s).get("plugin.net"),
            (t.path / "lib/libnccl-net-aws-ofi.so").string());
  s.env.set("NCCL_NET_PLUGIN", "none");
  EXPECT_EQ(collect_fingerprint(s).get("plugin.net"), "disabled (NCCL_NET_PLUGIN=none)");
}

TEST(FingerprintCollect, EnvironmentKeepsTransportVariablesOnly) {
  FingerprintSources s;
  s.sys_root = kSys + "ib_up";
  s.read_process_limits = false;
  s.env.set("NCCL_SOCKET_IFNAME", "eth0");
  s.env.set("CUDA_VISIBLE_DEVICES", "3");
  s.env.set("CUDA_MODULE_LOADING", "LAZY");
  s.env.set("OMPI_MCA_btl_tcp_if_include", "eth0");
  s.env.set("OMPI_MCA_orte_ess_num_procs", "8");
  s.env.set("HOME", "/root");
  for (int i = 0; i < 500; ++i) s.env.set("UCX_X" + std::to_string(i), "1");  // sorted last: cut
  auto f = collect_fingerprint(s);
  EXPECT_EQ(f.get("env.NCCL_SOCKET_IFNAME"), "eth0");
  EXPECT_EQ(f.get("env.CUDA_MODULE_LOADING"), "LAZY");
  EXPECT_EQ(f.get("env.OMPI_MCA_btl_tcp_if_include"), "eth0");
  EXPECT_EQ(f.get("env.CUDA_VISIBLE_DEVICES"), "unset");
  EXPECT_EQ(f.get("env.OMPI_MCA_orte_ess_num_procs"), "unset");
  EXPECT_EQ(f.get("env.HOME"), "unset");
  EXPECT_LE(f.fields.size(), kMaxFields);
  EXPECT_NE(f.get("env_skipped"), "unknown");
  EXPECT_EQ(f.get("gpu.model"), "none");
  EXPECT_EQ(f.get("nccl.version"), "none");
  EXPECT_EQ(f.get("ib.mlx5_0/1"), "ACTIVE, 200 Gb/sec (4X HDR), InfiniBand");
  EXPECT_LT(nlohmann::json(f).dump().size(), 64u << 10);
}

TEST(FingerprintJson, MalformedPeerFingerprintIsReadWithoutThrowing) {
  Fingerprint f;
  EXPECT_NO_THROW(from_json(nlohmann::json(42), f));
  EXPECT_TRUE(f.empty());
  nlohmann::json j = {{"kernel", "6.1"},
                      {"shm", 5},
                      {"gpu.model", nullptr},
                      {std::string(500, 'k'), "x"},
                      {"nccl.path", std::string(100000, 'p')}};
  for (int i = 0; i < 5000; ++i) j["env.X" + std::to_string(i)] = "v";
  EXPECT_NO_THROW(from_json(j, f));
  EXPECT_EQ(f.get("kernel"), "6.1");
  EXPECT_EQ(f.get("shm"), "unknown");
  EXPECT_LE(f.get("nccl.path").size(), kMaxValueChars);
  EXPECT_LE(f.fields.size(), kMaxFields);
}

TEST(FingerprintCollect, GpuPciePathAndNvmlFields) {
  FingerprintSources s;
  s.sys_root = kSys + "pcie_acs_on";
  s.read_process_limits = false;
  s.gpu_model = "NVIDIA H100 80GB HBM3";
  s.gpu_count = "8";
  s.gpu_bus_id = "0000:1B:00.0";
  s.nvml = {{"gpu.ecc", "enabled"}, {"gpu.nvml", "loaded"}, {"not-a-gpu-field", "x"}};
  auto f = collect_fingerprint(s);
  EXPECT_EQ(f.get("iommu"), "on");
  EXPECT_EQ(f.get("gpu.iommu"), "translated (DMA-FQ)");
  EXPECT_EQ(f.get("pcie.acs"), "enabled on 0000:18:08.0 (SrcValid,ReqRedir,CmplRedir,UpstreamFwd)");
  EXPECT_EQ(f.get("gpu.ecc"), "enabled");
  EXPECT_EQ(f.get("not-a-gpu-field"), "unknown");
  EXPECT_TRUE(is_host_field("iommu"));
  // No GPU: no PCIe path to read, the host's IOMMU still is.
  FingerprintSources none;
  none.sys_root = kSys + "none";
  none.read_process_limits = false;
  f = collect_fingerprint(none);
  EXPECT_EQ(f.get("iommu"), "off");
  EXPECT_EQ(f.fields.count("pcie.acs"), 0u);
  EXPECT_EQ(f.fields.count("gpu.ecc"), 0u);
}

}  // namespace
}  // namespace gpudiag
