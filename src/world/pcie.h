// The PCIe path of a GPU as sysfs shows it: whether an IOMMU translates its
// DMA, and whether ACS (Access Control Services) redirects peer-to-peer
// traffic on the PCIe switch ports above it. With ACS redirecting on a
// switch, GPU-to-GPU traffic goes up to the CPU's root complex instead of
// across the switch: slower, and with an IOMMU translating it often fails
// (NCCL's troubleshooting guide). Readers take the sysfs root as a parameter
// so tests feed captured trees; ACS lives in the bridges' extended config
// space, which only root can read: for others it is "unknown".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpudiag {

/// "on" when the kernel has IOMMU groups or units (/sys/kernel/iommu_groups,
/// /sys/class/iommu), else "off".
std::string read_iommu(const std::string& sys_root);

/// The GPU's IOMMU domain: "passthrough" (type identity), "translated (DMA-FQ)",
/// "off" (no group), "unknown".
std::string read_gpu_iommu(const std::string& sys_root, const std::string& bus_id);

/// The ACS control bits redirecting P2P (ReqRedir, CmplRedir, EgressCtrl) or
/// set at all, as lspci names them: "SrcValid,ReqRedir,CmplRedir,UpstreamFwd";
/// "" when none. `config` is a bridge's config space; nullopt-like "unknown"
/// when it is too short to hold the extended capabilities (not root) and
/// "no ACS" when the bridge has no ACS capability.
std::string acs_control(std::string_view config);

/// ACS on the PCIe switch ports between the GPU and its root port:
/// "disabled (N switch ports)", "enabled on 0000:02:08.0 (SrcValid,ReqRedir,...)[; ...]",
/// "no PCIe switch above the GPU", or "unknown (...)".
std::string read_gpu_acs(const std::string& sys_root, const std::string& bus_id);

/// True for a read_gpu_acs value that redirects P2P.
bool acs_redirects(const std::string& value);

}  // namespace gpudiag
