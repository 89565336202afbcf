// Reading a GPU's management state through NVML (nvml.h). Only stable entry
// points of NVML's C API are used (present since driver 450 except the
// remapped rows, Ampere and newer, and the fabric information, driver 525 and
// newer, which are looked up optionally). Each
// reading initialises NVML and shuts it down again: NVML counts its users,
// and the fingerprint reads one GPU once a process.
#include "world/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <iterator>

namespace gpudiag {

namespace {

template <typename F>
bool bind(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

std::string enabled(int state) { return state ? "enabled" : "disabled"; }

std::string failed_call(int rc) { return rc == kNvmlNotSupported ? "not supported" : "unknown"; }

/// gpu.nvlink_domain and gpu.nvlink_bw (nvml.h) from NVML's fabric info, as
/// NCCL reads it (src/init.cc, the MNNVL block of fillInfo: v2 first).
void read_fabric(const NvmlApi& a, void* dev, std::map<std::string, std::string>& f) {
  f["gpu.nvlink_domain"] = f["gpu.nvlink_bw"] = "not reported";
  NvmlFabricInfoV2 v2{};
  v2.version = kNvmlFabricInfoV2;
  int rc = -1;
  bool health = false;
  if (a.fabric_info_v) rc = a.fabric_info_v(dev, &v2), health = rc == kNvmlSuccess;
  if (rc != kNvmlSuccess && a.fabric_info) {
    NvmlFabricInfoV1 v1{};
    rc = a.fabric_info(dev, &v1);
    std::copy(std::begin(v1.cluster_uuid), std::end(v1.cluster_uuid), v2.cluster_uuid);
    v2.status = v1.status, v2.clique_id = v1.clique_id, v2.state = v1.state;
  }
  if (rc == kNvmlNotSupported || (rc == kNvmlSuccess && v2.state == kFabricNotSupported)) {
    f["gpu.nvlink_domain"] = "none";
    return;
  }
  if (rc != kNvmlSuccess) return;
  if (v2.state == kFabricNotStarted || v2.state == kFabricInProgress) {
    f["gpu.nvlink_domain"] = "registering";
  } else if (v2.state != kFabricCompleted) {
    return;
  } else if (v2.status != kNvmlSuccess) {
    f["gpu.nvlink_domain"] = "failed (NVML error " + std::to_string(v2.status) + ")";
  } else {
    static const char* hex = "0123456789abcdef";
    std::string uuid;
    bool zero = true;
    for (unsigned char b : v2.cluster_uuid) {
      uuid += hex[b >> 4], uuid += hex[b & 15];
      zero = zero && b == 0;
    }
    // A zero UUID means no multi-node NVLink (NCCL: ncclTopoCheckMNNVL).
    f["gpu.nvlink_domain"] = zero ? "none" : uuid + "/" + std::to_string(v2.clique_id);
  }
  if (health) {
    const unsigned bw = v2.health_mask & kFabricHealthDegradedWidth;
    f["gpu.nvlink_bw"] = bw == 1 ? "degraded" : bw == 2 ? "full" : "not reported";
  }
}

}  // namespace

NvmlLibrary open_nvml(const std::string& path) {
  NvmlLibrary l;
  const std::string file = path.empty() ? "libnvidia-ml.so.1" : path;
  void* h = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    l.why = e ? e : "cannot load " + file;
    return l;
  }
  auto& a = l.api;
  if (!bind(h, "nvmlInit_v2", a.init) || !bind(h, "nvmlShutdown", a.shutdown) ||
      !bind(h, "nvmlDeviceGetHandleByPciBusId_v2", a.handle_by_bus_id) ||
      !bind(h, "nvmlDeviceGetPersistenceMode", a.persistence_mode) ||
      !bind(h, "nvmlDeviceGetEccMode", a.ecc_mode) || !bind(h, "nvmlDeviceGetClockInfo", a.clock) ||
      !bind(h, "nvmlDeviceGetMaxClockInfo", a.max_clock)) {
    l.why = file + " lacks an NVML function gpudiag uses (a driver older than 450?)";
    l.api = {};
    return l;  // the handle stays open: harmless, and dlclose of NVML is not
  }
  bind(h, "nvmlDeviceGetRemappedRows", a.remapped_rows);
  bind(h, "nvmlDeviceGetGpuFabricInfoV", a.fabric_info_v);
  bind(h, "nvmlDeviceGetGpuFabricInfo", a.fabric_info);
  bind(h, "nvmlDeviceGetCount_v2", a.device_count);
  bind(h, "nvmlDeviceGetHandleByIndex_v2", a.handle_by_index);
  bind(h, "nvmlDeviceGetPciInfo_v3", a.pci_info);
  bind(h, "nvmlDeviceGetTotalEccErrors", a.total_ecc);
  bind(h, "nvmlDeviceGetRetiredPagesPendingStatus", a.retired_pending);
  bind(h, "nvmlDeviceGetNvLinkState", a.nvlink_state);
  bind(h, "nvmlDeviceGetNvLinkErrorCounter", a.nvlink_errors);
  bind(h, "nvmlDeviceGetNvLinkRemoteDeviceType", a.nvlink_remote_type);
  bind(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2", a.nvlink_remote_pci);
  if (!bind(h, "nvmlDeviceGetCurrentClocksEventReasons", a.clock_events))
    bind(h, "nvmlDeviceGetCurrentClocksThrottleReasons", a.clock_events);
  l.loaded = true;
  return l;
}

const NvmlLibrary& load_nvml() {
  static const NvmlLibrary lib = open_nvml("");
  return lib;
}

std::map<std::string, std::string> read_nvml_fields(const NvmlLibrary& lib,
                                                    const std::string& bus_id) {
  std::map<std::string, std::string> f;
  for (const char* k : {"gpu.persistence", "gpu.ecc", "gpu.clock.sm", "gpu.clock.sm_max",
                        "gpu.clock.mem", "gpu.clock.mem_max", "gpu.remapped_rows", "gpu.nvlink_domain",
                        "gpu.nvlink_bw"})
    f[k] = "unknown";
  if (!lib.loaded) {
    f["gpu.nvml"] = "not loaded: " + lib.why;
    return f;
  }
  const NvmlApi& a = lib.api;
  if (int rc = a.init(); rc != kNvmlSuccess) {
    f["gpu.nvml"] = "nvmlInit failed (NVML error " + std::to_string(rc) + ")";
    return f;
  }
  void* dev = nullptr;
  if (int rc = a.handle_by_bus_id(bus_id.c_str(), &dev); rc != kNvmlSuccess || !dev) {
    f["gpu.nvml"] = "no GPU at bus id " + bus_id + " (NVML error " + std::to_string(rc) + ")";
    a.shutdown();
    return f;
  }
  f["gpu.nvml"] = "loaded";
  int mode = 0, pending = 0;
  int rc = a.persistence_mode(dev, &mode);
  f["gpu.persistence"] = rc == kNvmlSuccess ? enabled(mode) : failed_call(rc);
  rc = a.ecc_mode(dev, &mode, &pending);
  f["gpu.ecc"] = rc != kNvmlSuccess ? failed_call(rc)
                 : mode == pending  ? enabled(mode)
                                    : enabled(mode) + " (" + enabled(pending) + " after reset)";
  const std::pair<const char*, int> clocks[] = {{"sm", kNvmlClockSm}, {"mem", kNvmlClockMem}};
  for (const auto& [name, type] : clocks) {
    unsigned mhz = 0;
    rc = a.clock(dev, type, &mhz);
    f[std::string("gpu.clock.") + name] =
        rc == kNvmlSuccess ? std::to_string(mhz) : failed_call(rc);
    rc = a.max_clock(dev, type, &mhz);
    f[std::string("gpu.clock.") + name + "_max"] =
        rc == kNvmlSuccess ? std::to_string(mhz) : failed_call(rc);
  }
  if (a.remapped_rows) {
    unsigned corr = 0, unc = 0, pend = 0, fail = 0;
    rc = a.remapped_rows(dev, &corr, &unc, &pend, &fail);
    f["gpu.remapped_rows"] = rc != kNvmlSuccess
                                 ? failed_call(rc)
                                 : std::to_string(corr) + " correctable, " + std::to_string(unc) +
                                       " uncorrectable" + (pend ? ", pending" : "") +
                                       (fail ? ", failed" : "");
  } else {
    f["gpu.remapped_rows"] = "not supported";
  }
  read_fabric(a, dev, f);
  a.shutdown();
  return f;
}

}  // namespace gpudiag
