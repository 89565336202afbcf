// The GPU's management state from NVML (libnvidia-ml.so.1, part of the
// driver): persistence mode, ECC mode, current and maximum clocks, remapped
// memory rows, and the multi-node NVLink domain (GB200/GB300 NVL72) the GPU
// belongs to with its fabric health. The library is loaded at run time with dlopen, once a process;
// where it is absent (no driver, a container without it) every value is
// "unknown" and nothing fails. The calls go through NvmlApi, a table of the
// few functions used, so tests drive the reading with synthetic values.
#pragma once

#include <map>
#include <string>

namespace gpudiag {

struct NvmlPciInfo;  // nvmlPciInfo_t: world/nvlink_topology.h

/// NVML's functions as its C API declares them, enums and handles as plain
/// types (an nvmlReturn_t is an int, 0 success; a device handle a pointer).
struct NvmlApi {
  int (*init)() = nullptr;                                       ///< nvmlInit_v2
  int (*shutdown)() = nullptr;                                   ///< nvmlShutdown
  int (*handle_by_bus_id)(const char*, void**) = nullptr;        ///< ..._v2
  int (*persistence_mode)(void*, int*) = nullptr;                ///< nvmlDeviceGetPersistenceMode
  int (*ecc_mode)(void*, int* current, int* pending) = nullptr;  ///< nvmlDeviceGetEccMode
  int (*clock)(void*, int type, unsigned*) = nullptr;            ///< nvmlDeviceGetClockInfo
  int (*max_clock)(void*, int type, unsigned*) = nullptr;        ///< nvmlDeviceGetMaxClockInfo
  /// nvmlDeviceGetRemappedRows (Ampere and newer; may be absent).
  int (*remapped_rows)(void*, unsigned* correctable, unsigned* uncorrectable, unsigned* pending,
                       unsigned* failure) = nullptr;
  /// nvmlDeviceGetGpuFabricInfoV with an NvmlFabricInfoV2 (driver 550 and
  /// newer), else nvmlDeviceGetGpuFabricInfo with an NvmlFabricInfoV1 (525
  /// and newer); both may be absent.
  int (*fabric_info_v)(void*, void* info) = nullptr;
  int (*fabric_info)(void*, void* info) = nullptr;
  // The node's counters (hw/nvml_counters.h), each looked up optionally:
  int (*device_count)(unsigned*) = nullptr;                  ///< nvmlDeviceGetCount_v2
  int (*handle_by_index)(unsigned, void**) = nullptr;        ///< nvmlDeviceGetHandleByIndex_v2
  int (*pci_info)(void*, NvmlPciInfo*) = nullptr;     ///< nvmlDeviceGetPciInfo_v3
  /// nvmlDeviceGetTotalEccErrors(device, nvmlMemoryErrorType_t, nvmlEccCounterType_t, count).
  int (*total_ecc)(void*, int error_type, int counter_type, unsigned long long*) = nullptr;
  int (*retired_pending)(void*, int*) = nullptr;  ///< nvmlDeviceGetRetiredPagesPendingStatus
  int (*nvlink_state)(void*, unsigned link, int*) = nullptr;  ///< nvmlDeviceGetNvLinkState
  /// nvmlDeviceGetNvLinkErrorCounter(device, link, nvmlNvLinkErrorCounter_t, value).
  int (*nvlink_errors)(void*, unsigned link, int counter, unsigned long long*) = nullptr;
  /// nvmlDeviceGetCurrentClocksEventReasons (driver 535 and newer), else the
  /// older name nvmlDeviceGetCurrentClocksThrottleReasons: a bit mask.
  int (*clock_events)(void*, unsigned long long*) = nullptr;
  // What is at a link's other end (world/nvlink_topology.h), optional:
  int (*nvlink_remote_type)(void*, unsigned link, int*) = nullptr;  ///< ...RemoteDeviceType
  /// nvmlDeviceGetNvLinkRemotePciInfo_v2 into an nvmlPciInfo_t.
  int (*nvlink_remote_pci)(void*, unsigned link, void*) = nullptr;
};


/// nvmlGpuFabricInfo_t and nvmlGpuFabricInfo_v2_t as NVML's header declares
/// them (NCCL 2.28 repeats both in src/include/nvmlwrap.h): the UUID of the
/// NVLink cluster, the clique inside it, the registration state and, in v2,
/// the health mask. NCCL puts two GPUs in one multi-node NVLink domain when
/// both UUID (non-zero) and clique match (src/graph/paths.cc,
/// ncclTopoCheckMNNVL).
struct NvmlFabricInfoV1 {
  unsigned char cluster_uuid[16];
  int status;  ///< nvmlReturn_t, meaningful once state is completed
  unsigned clique_id;
  unsigned char state;
};
struct NvmlFabricInfoV2 {
  unsigned version;  ///< NVML_STRUCT_VERSION(GpuFabricInfo, 2)
  unsigned char cluster_uuid[16];
  int status;
  unsigned clique_id;
  unsigned char state;
  unsigned health_mask;
};
/// NVML_STRUCT_VERSION: the structure's size with the version in the top byte.
inline constexpr unsigned kNvmlFabricInfoV2 = sizeof(NvmlFabricInfoV2) | (2u << 24);
/// NVML_GPU_FABRIC_STATE_*.
inline constexpr unsigned char kFabricNotSupported = 0, kFabricNotStarted = 1,
                               kFabricInProgress = 2, kFabricCompleted = 3;
/// The degraded-bandwidth field of the health mask: shift 0, values 0 not
/// reported, 1 degraded, 2 full bandwidth. NVML's header gives its width
/// mask as 0x11, which would read 2 as 0; the two low bits hold the values.
inline constexpr unsigned kFabricHealthDegradedWidth = 0x3;

inline constexpr int kNvmlSuccess = 0;
inline constexpr int kNvmlNotSupported = 3;
inline constexpr int kNvmlClockSm = 1, kNvmlClockMem = 2;
/// nvmlMemoryErrorType_t, nvmlEccCounterType_t, nvmlEnableState_t, NVML_NVLINK_MAX_LINKS.
inline constexpr int kNvmlUncorrected = 1, kNvmlVolatile = 0, kNvmlAggregate = 1;
inline constexpr int kNvmlEnabled = 1;
inline constexpr unsigned kNvmlMaxLinks = 18;

/// The library, loaded once a process (never unloaded: NVML keeps threads).
struct NvmlLibrary {
  NvmlApi api;
  bool loaded = false;
  std::string why;  ///< why not loaded ("libnvidia-ml.so.1: cannot open shared object file")
};
/// Loads `path` ("" is the loader's search for libnvidia-ml.so.1); never throws.
NvmlLibrary open_nvml(const std::string& path);
/// open_nvml(""), once a process.
const NvmlLibrary& load_nvml();

/// One GPU's state as fingerprint fields: gpu.persistence, gpu.ecc
/// ("enabled", "disabled", "enabled (disabled after reset)", "not supported"),
/// gpu.clock.sm, gpu.clock.sm_max, gpu.clock.mem, gpu.clock.mem_max (MHz),
/// gpu.remapped_rows ("0 correctable, 0 uncorrectable", with ", pending"
/// and/or ", failed" when NVML says so). `lib` not loaded, or the GPU not
/// found by `bus_id`, gives "unknown" everywhere and gpu.nvml saying why.
/// gpu.nvlink_domain is "<cluster uuid, 32 hex>/<clique>" for a GPU in a
/// multi-node NVLink domain, "none", "registering" (the fabric manager has
/// not finished: NCCL cannot use the domain yet), "failed (NVML error N)" or
/// "not reported" (a driver without fabric information); gpu.nvlink_bw is
/// "full", "degraded" or "not reported".
std::map<std::string, std::string> read_nvml_fields(const NvmlLibrary& lib,
                                                    const std::string& bus_id);

}  // namespace gpudiag
