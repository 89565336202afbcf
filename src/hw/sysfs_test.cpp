// The sysfs readers against a tree shaped like a node's (made here: this
// machine has no InfiniBand or GPU): a physical NIC and a veth, an
// InfiniBand port, a GPU and a NIC function with link widths and AER
// counters. Counters are judged only by their change between two reads, as
// a check's two reads of the evidence (hw/evidence.h) judge them.
#include "hw/sysfs.h"

#include "hw/evidence.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpudiag::hw {
namespace {

namespace fs = std::filesystem;

struct HwSysfsTree {
  fs::path root = fs::temp_directory_path() / ("gpudiag-sysfs-" + std::to_string(getpid()));
  HwSysfsTree() {
    fs::remove_all(root);
    const fs::path pci = root / "sys/devices/pci0000:00";
    put(pci / "0000:3b:00.0/class", "0x030200");
    put(pci / "0000:3b:00.0/vendor", "0x10de");
    put(pci / "0000:3b:00.0/current_link_width", "8");
    put(pci / "0000:3b:00.0/max_link_width", "16");
    put(pci / "0000:3b:00.0/current_link_speed", "2.5 GT/s PCIe");
    put(pci / "0000:3b:00.0/max_link_speed", "32.0 GT/s PCIe");
    aer("0", "0", "3");
    put(pci / "0000:01:00.0/class", "0x020000");
    put(pci / "0000:01:00.0/vendor", "0x15b3");
    put(pci / "0000:01:00.0/current_link_width", "16");
    put(pci / "0000:01:00.0/max_link_width", "16");
    put(pci / "0000:00:1f.0/class", "0x060100");  // an ISA bridge: not read
    fs::create_directories(root / "sys/bus/pci/devices");
    for (const char* a : {"0000:3b:00.0", "0000:01:00.0", "0000:00:1f.0"})
      fs::create_directory_symlink(pci / a, root / "sys/bus/pci/devices" / a);
    const fs::path eth0 = root / "sys/class/net/eth0";
    put(eth0 / "operstate", "up");
    put(eth0 / "speed", "100000");
    put(eth0 / "carrier_changes", "7");
    fs::create_directory_symlink(pci / "0000:01:00.0", eth0 / "device");
    put(root / "sys/class/net/veth1/operstate", "up");  // no device link: virtual
    put(root / "sys/class/net/veth1/carrier_changes", "1");
    const fs::path port = root / "sys/class/infiniband/mlx5_0/ports/1";
    put(port / "state", "4: ACTIVE");
    put(port / "rate", "400 Gb/sec (4X NDR)");
    ib("0", "12", "0");
  }
  ~HwSysfsTree() { fs::remove_all(root); }
  void put(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  void aer(const std::string& fatal, const std::string& nonfatal, const std::string& cor) {
    const fs::path d = root / "sys/devices/pci0000:00/0000:3b:00.0";
    put(d / "aer_dev_fatal", "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nTOTAL_ERR_FATAL " + fatal);
    put(d / "aer_dev_nonfatal", "Undefined 0\nTLP 0\nTOTAL_ERR_NONFATAL " + nonfatal);
    put(d / "aer_dev_correctable", "RxErr 0\nBadTLP 0\nTOTAL_ERR_COR " + cor);
  }
  void ib(const std::string& downed, const std::string& symbol, const std::string& recovery) {
    const fs::path c = root / "sys/class/infiniband/mlx5_0/ports/1/counters";
    put(c / "link_downed", downed);
    put(c / "symbol_error", symbol);
    put(c / "link_error_recovery", recovery);
  }
};

TEST(HwSysfs, ReadsNicsIbPortsAndPcieLinks) {
  HwSysfsTree t;
  const auto s = read_sysfs(t.root.string());
  ASSERT_EQ(s.nics.size(), 1u);  // veth1 has no device
  EXPECT_EQ(s.nics[0].name, "eth0");
  EXPECT_EQ(s.nics[0].pci, "0000:01:00.0");
  EXPECT_EQ(s.nics[0].speed_mbps, 100000);
  EXPECT_EQ(s.nics[0].carrier_changes, 7);
  ASSERT_EQ(s.ib_ports.size(), 1u);
  EXPECT_EQ(s.ib_ports[0].state, "4: ACTIVE");
  EXPECT_EQ(s.ib_ports[0].counters.at("symbol_error"), 12);
  ASSERT_EQ(s.pcie.size(), 2u);
  EXPECT_EQ(s.pcie[1].address, "0000:3b:00.0");
  EXPECT_EQ(s.pcie[1].role, "gpu");
  EXPECT_EQ(s.pcie[1].aer_correctable, 3);
  const auto state = sysfs_state_findings(s);
  ASSERT_EQ(state.size(), 1u);  // the GPU at x8 of x16; its idle 2.5 GT/s is not judged
  EXPECT_EQ(state[0].what, "PCIe link trained at x8 of x16");
  EXPECT_EQ(state[0].cls, FindingClass::notice);
}

TEST(HwSysfs, CountersAreJudgedByTheirChangeOnly) {
  HwSysfsTree t;
  const auto a = read_sysfs(t.root.string());
  EXPECT_TRUE(sysfs_changes(a, read_sysfs(t.root.string())).empty());  // high values, no change
  t.put(t.root / "sys/class/net/eth0/carrier_changes", "9");
  t.put(t.root / "sys/class/net/veth1/carrier_changes", "5");
  t.ib("1", "20", "0");
  t.aer("0", "1", "3");
  const auto fs = sysfs_changes(a, read_sysfs(t.root.string()));
  std::map<std::string, const Finding*> by;
  for (const auto& f : fs) by[f.device + " " + f.what] = &f;
  ASSERT_EQ(fs.size(), 4u);
  const Finding* flap = by.at("eth0 network link flapped");
  EXPECT_EQ(flap->count, 1u);  // down and up: one flap
  EXPECT_EQ(flap->cls, FindingClass::node);
  EXPECT_TRUE(makes_unfit(*flap, 0));
  EXPECT_FALSE(makes_unfit(*flap, std::nullopt));
  EXPECT_EQ(by.at("mlx5_0/1 InfiniBand link_downed grew")->cls, FindingClass::node);
  EXPECT_EQ(by.at("mlx5_0/1 InfiniBand symbol_error grew")->cls, FindingClass::notice);
  EXPECT_EQ(by.at("0000:3b:00.0 PCIe non-fatal errors counted")->action, Action::drain);
}

TEST(HwSysfs, AerFilesAndHostileValues) {
  EXPECT_EQ(aer_total("RxErr 1\nBadTLP 2\nTOTAL_ERR_COR 3\n"), 3);
  EXPECT_EQ(aer_total("RxErr 1\nBadTLP 2\n"), 3);
  EXPECT_EQ(aer_total(""), -1);
  HwSysfsTree t;
  t.put(t.root / "sys/class/net/eth0/carrier_changes", "\x1b[2J99999999999999999999999");
  t.put(t.root / "sys/class/net/eth0/operstate", std::string(10000, 'u'));
  const auto s = read_sysfs(t.root.string());
  EXPECT_EQ(s.nics[0].carrier_changes, -1);
  EXPECT_LE(s.nics[0].operstate.size(), 64u);
  EXPECT_TRUE(read_sysfs("/nonexistent-root").nics.empty());
}

TEST(HwSysfs, ACheckWindowFailsOnlyOnAPhysicalLinksChange) {
  HwSysfsTree t;
  const fs::path kmsg = t.root / "kmsg.txt";
  t.put(kmsg, "6,0,1000000,-;EDAC MC: Ver: 3.0.0");
  const HwSources src{.kmsg = kmsg.string(), .root = t.root.string()};
  const auto start = collect_hw_evidence(src);
  EXPECT_EQ(unfit_reason(start, 0), "");
  // Healthy: nothing moved; the narrow link is a notice, never a failure.
  auto end = collect_hw_changes(src, start.sysfs);
  EXPECT_EQ(unfit_reason(end, 0), "");
  EXPECT_EQ(finding_counts(end), (std::map<std::string, int>{{"notice/none", 1}}));
  // A virtual interface's carrier moving, and an IB symbol error, fail nothing.
  t.put(t.root / "sys/class/net/veth1/carrier_changes", "40");
  t.ib("0", "13", "0");
  end = collect_hw_changes(src, start.sysfs);
  EXPECT_EQ(unfit_reason(end, 0), "");
  // The physical NIC's carrier went down and up once.
  t.put(t.root / "sys/class/net/eth0/carrier_changes", "9");
  end = collect_hw_changes(src, start.sysfs);
  EXPECT_EQ(unfit_reason(end, 0), "network link flapped on eth0: check the cable");
  EXPECT_EQ(finding_counts(end).at("node/check_cable"), 1);
  // A source read without sysfs compares nothing.
  EXPECT_EQ(unfit_reason(collect_hw_changes({.kmsg = kmsg.string(), .sysfs = false}, start.sysfs), 0), "");
}

Env root_env(const std::string& root) {
  return Env(std::map<std::string, std::string>{{"GPUDIAG_TEST_SYSFS_ROOT", root}});
}

TEST(HwSysfs, TheTestRootComesFromTheEnvironmentOnlyWhenAbsolute) {
  EXPECT_EQ(hw_sources_from_env(Env{}).root, "/");
  EXPECT_EQ(hw_sources_from_env(root_env("/tmp/tree")).root, "/tmp/tree");
  EXPECT_EQ(hw_sources_from_env(root_env("relative/tree")).root, "/");
  EXPECT_EQ(hw_sources_from_env(root_env("/" + std::string(5000, 'a'))).root, "/");
  EXPECT_EQ(hw_sources_from_env(root_env("/tmp/tree")).kmsg, "/dev/kmsg");
}

}  // namespace
}  // namespace gpudiag::hw
