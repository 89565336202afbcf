// The GPU's management state from NVML (libnvidia-ml.so.1, part of the
// driver): persistence mode, ECC mode, current and maximum clocks, remapped
// memory rows. The library is loaded at run time with dlopen, once a process;
// where it is absent (no driver, a container without it) every value is
// "unknown" and nothing fails. The calls go through NvmlApi, a table of the
// few functions used, so tests drive the reading with synthetic values.
#pragma once

#include <map>
#include <string>

namespace gpudiag {

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
};

inline constexpr int kNvmlSuccess = 0;
inline constexpr int kNvmlNotSupported = 3;
inline constexpr int kNvmlClockSm = 1, kNvmlClockMem = 2;

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
std::map<std::string, std::string> read_nvml_fields(const NvmlLibrary& lib,
                                                    const std::string& bus_id);

}  // namespace gpudiag
