// The PCIe path readers on captured sysfs trees (tests/data/sysfs/pcie_*,
// written by make_pcie_trees.py there): ACS on a switch port above the GPU,
// ACS off, config space unreadable (not root), a GPU on a root port; the
// IOMMU off, translating and in passthrough.
#include "world/pcie.h"

#include <gtest/gtest.h>

#include <string>

namespace gpudiag {
namespace pcie_test {  // named: the unity build puts this folder's tests in one unit

const std::string kSys = std::string(GPUDIAG_TEST_DATA) + "/sysfs/";
const std::string kGpu = "0000:1B:00.0";  // as CUDA writes it

TEST(PcieAcs, SwitchPortRedirectingPeerToPeer) {
  const auto v = read_gpu_acs(kSys + "pcie_acs_on", kGpu);
  EXPECT_EQ(v, "enabled on 0000:18:08.0 (SrcValid,ReqRedir,CmplRedir,UpstreamFwd)");
  EXPECT_TRUE(acs_redirects(v));
}

TEST(PcieAcs, ClearedOnTheSwitchThoughTheRootPortKeepsIt) {
  const auto v = read_gpu_acs(kSys + "pcie_acs_off", kGpu);
  EXPECT_EQ(v, "disabled (2 switch ports)");
  EXPECT_FALSE(acs_redirects(v));
}

TEST(PcieAcs, UnreadableConfigSpaceIsUnknownNotAnError) {
  const auto v = read_gpu_acs(kSys + "pcie_not_root", kGpu);
  EXPECT_EQ(v, "unknown (the switch ports' config space is readable by root only)");
  EXPECT_FALSE(acs_redirects(v));
  EXPECT_EQ(read_gpu_acs(kSys + "pcie_direct", kGpu), "no PCIe switch above the GPU");
  EXPECT_EQ(read_gpu_acs(kSys + "none", kGpu), "unknown (no such PCI device in sysfs)");
  EXPECT_EQ(read_gpu_acs("/nonexistent-root", "garbage"), "unknown (no such PCI device in sysfs)");
}

TEST(PcieAcs, ControlBitsFromConfigSpace) {
  EXPECT_EQ(acs_control(std::string(64, '\0')), "unknown");  // what a non-root user reads
  std::string space(4096, '\0');
  EXPECT_EQ(acs_control(space), "no ACS");
  // A capability list that loops on itself ends without hanging.
  space[0x100] = 0x01;
  space[0x103] = 0x10;  // next = 0x100
  EXPECT_EQ(acs_control(space), "no ACS");
  space[0x100] = 0x0D;  // ACS, control = EgressCtrl only
  space[0x106] = 0x20;
  EXPECT_EQ(acs_control(space), "EgressCtrl");
  EXPECT_TRUE(acs_redirects("enabled on 0000:01:00.0 (EgressCtrl)"));
  EXPECT_FALSE(acs_redirects("enabled on 0000:01:00.0 (SrcValid)"));
}

TEST(PcieIommu, OffTranslatedPassthrough) {
  EXPECT_EQ(read_iommu(kSys + "pcie_acs_on"), "on");
  EXPECT_EQ(read_gpu_iommu(kSys + "pcie_acs_on", kGpu), "translated (DMA-FQ)");
  EXPECT_EQ(read_gpu_iommu(kSys + "pcie_acs_off", kGpu), "passthrough");
  EXPECT_EQ(read_iommu(kSys + "pcie_not_root"), "off");
  EXPECT_EQ(read_gpu_iommu(kSys + "pcie_not_root", kGpu), "off");
  EXPECT_EQ(read_gpu_iommu(kSys + "none", kGpu), "unknown");
  // NVML's form of the bus id (8-digit domain) finds the same device.
  EXPECT_EQ(read_gpu_iommu(kSys + "pcie_acs_off", "00000000:1B:00.0"), "passthrough");
}

}  // namespace
}  // namespace gpudiag
