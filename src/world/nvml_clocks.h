// One GPU's SM clock, its maximum and why its clocks are held down, read
// through NVML (world/nvml.h) as the compute phase ends, so a GPU whose GEMMs
// ran slow says whether power, heat or a setting held it back. The reasons are
// the bits of nvmlDeviceGetCurrentClocksEventReasons (driver 535 and newer;
// nvmlDeviceGetCurrentClocksThrottleReasons before, the same bits), named as
// nvml.h defines them:
//
//   0x001 nvmlClocksEventReasonGpuIdle                 nothing to run
//   0x002 nvmlClocksEventReasonApplicationsClocksSetting  application clocks set
//   0x004 nvmlClocksEventReasonSwPowerCap               the power limit
//   0x008 nvmlClocksThrottleReasonHwSlowdown            clocks cut 2x or more:
//                                                       heat, power brake, PSU
//   0x010 nvmlClocksEventReasonSyncBoost                held to its sync-boost group
//   0x020 nvmlClocksEventReasonSwThermalSlowdown        GPU or memory too warm
//   0x040 nvmlClocksThrottleReasonHwThermalSlowdown     cut 2x or more by heat
//   0x080 nvmlClocksThrottleReasonHwPowerBrakeSlowdown  the external power brake
//   0x100 nvmlClocksEventReasonDisplayClockSetting      the display clock
//
// nvmlDeviceGetClockInfo / nvmlDeviceGetMaxClockInfo with NVML_CLOCK_SM (1)
// give the clocks in MHz. Where NVML is absent, the GPU is not found or a call
// fails, the value stays unknown and `why` says so; nothing fails.
#pragma once

#include <string>
#include <vector>

#include "world/nvml.h"

namespace gpudiag {

struct GpuClocks {
  int sm_mhz = -1, sm_max_mhz = -1;  ///< -1 unknown
  long long events = -1;             ///< the clocks-event mask; -1 unknown
  std::string why;                   ///< what is unknown and why ("" all read)
};

/// Reads the GPU at `bus_id` ("0000:1B:00.0"), initialising NVML and shutting it down.
GpuClocks read_gpu_clocks(const NvmlLibrary& lib, const std::string& bus_id);

/// The reasons set in `mask`, in bit order ("HW slowdown", "HW thermal
/// slowdown", ...); an unnamed bit as "reason 0x200".
std::vector<std::string> clock_event_names(unsigned long long mask);

/// "SM clock 1005/1980 MHz, throttled: HW slowdown, HW thermal slowdown";
/// "SM clock 1980/1980 MHz, no throttle reason"; "clocks unknown (why)".
std::string clocks_text(const GpuClocks& c);

}  // namespace gpudiag
