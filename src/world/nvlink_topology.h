// The NVLinks of one GPU as NVML reports them, read the way NCCL builds its
// topology (src/graph/xml.cc ncclTopoGetXmlFromGpu): for each link, whether
// it is up (nvmlDeviceGetNvLinkState) and what is at its other end
// (nvmlDeviceGetNvLinkRemoteDeviceType: an NVSwitch, or a GPU whose PCI bus id
// nvmlDeviceGetNvLinkRemotePciInfo_v2 gives; NCCL counts the links to each
// bus id). The answer is one short text a rank record carries: "switch:18"
// (18 links up, to NVSwitches), "0000:1b:00.0=6,0000:3b:00.0=6" (links up to
// each peer GPU: a mesh board), "none" (no link up) or "" (not known: no
// NVML, an unknown GPU). The expected-bandwidth verdict reads the job's GPUs'
// texts (nvlink_pairs): within one node the figure follows the topology,
// not the GPU's name. The functions are the process's one NVML's
// (world/nvml.h load_nvml); tests pass a table of their own.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpudiag {

struct NvlinkApi {
  int (*init)() = nullptr;                                 ///< nvmlInit_v2
  int (*shutdown)() = nullptr;                             ///< nvmlShutdown
  int (*handle_by_bus_id)(const char*, void**) = nullptr;  ///< ..._v2
  int (*state)(void*, unsigned link, int* active) = nullptr;
  int (*remote_type)(void*, unsigned link, int* type) = nullptr;
  /// nvmlDeviceGetNvLinkRemotePciInfo_v2 into an nvmlPciInfo_t (NvmlPciInfo).
  int (*remote_pci)(void*, unsigned link, void* pci) = nullptr;
};

/// nvmlPciInfo_t as NVML's header declares it.
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
inline constexpr int kNvlinkMaxLinks = 18;  ///< NVML_NVLINK_MAX_LINKS
inline constexpr int kNvlinkRemoteSwitch = 2;  ///< NVML_NVLINK_DEVICE_TYPE_SWITCH

/// The table over libnvidia-ml.so.1, loaded once; every entry null without it.
const NvlinkApi& nvlink_api();

/// The text above for the GPU at `bus_id` ("" when NVML cannot say).
std::string read_nvlink_peers(const NvlinkApi& api, const std::string& bus_id);

/// The NVLink topology between the GPUs of one node, from their texts by
/// bus id: every GPU to NVSwitches, or the fewest links any pair of them has
/// (0: a pair without NVLink); known only when every GPU's text is.
struct NvlinkPairs {
  bool known = false;
  bool switched = false;
  int links_per_pair = 0;
};
NvlinkPairs nvlink_pairs(const std::map<std::string, std::string>& peers_by_bus_id);

}  // namespace gpudiag
