// Every GPU's health counters as NVML reports them (world/nvml.h loads the
// library): uncorrected ECC errors (volatile: since the GPU's last reset, and
// aggregate: its lifetime), retired pages or remapped rows waiting for a reset,
// how many NVLinks are up and their error counters (replay, recovery, CRC),
// and why the clocks are held down (the clocks-event mask: hardware slowdown,
// thermal, power brake).
//
// Judged as the other sources are (finding.h): a state that only a GPU reset
// clears (rows or pages pending, a remapping that failed, links down beside
// GPUs with all theirs up) is a node finding whenever it is read; counters
// are judged by their change between two reads (a check's start and end),
// never by their value: an uncorrected error during the check means reset the
// GPU, NVLink error counts that moved are a notice. Clocks held down by the
// hardware are a notice (the compute and bandwidth figures say what it cost).
// Where NVML is absent or a call is not supported, the field is unknown and
// nothing is judged.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hw/finding.h"
#include "world/nvml.h"

namespace gpudiag::hw {

struct GpuCounters {
  std::string device;  ///< "0000:3b:00", as the kernel log names the GPU
  long long ecc_volatile = -1, ecc_aggregate = -1;  ///< uncorrected; -1 unknown
  int pages_pending = -1;                           ///< retired pages pending (pre-Ampere)
  int rows_pending = -1, rows_failed = -1;          ///< remapped rows (Ampere and newer)
  int links_up = -1, links_known = 0;               ///< NVLinks active / reporting a state
  std::map<std::string, long long> link_errors;     ///< "replay", "recovery", "crc_flit", "crc_data": summed over links
  long long clock_events = -1;                      ///< the clocks-event mask; -1 unknown
};

struct NvmlSnapshot {
  bool read = false;
  std::string why;  ///< when not read: "libnvidia-ml.so.1: cannot open shared object file"
  std::vector<GpuCounters> gpus;
};

/// Every GPU NVML lists (at most 64), initialising NVML and shutting it down.
NvmlSnapshot read_nvml_counters(const NvmlLibrary& lib);

/// NVML's bus id ("00000000:3B:00.0") as the kernel log writes it ("0000:3b:00").
std::string kernel_bus_id(const std::string& nvml_bus_id);

/// What one read shows by itself: rows or pages waiting for a reset, failed
/// remapping, a GPU with fewer NVLinks up than another GPU of the node, clocks
/// held down by the hardware.
std::vector<Finding> nvml_state_findings(const NvmlSnapshot& s);

/// What changed between two reads: uncorrected ECC errors (reset the GPU),
/// NVLink error counters (a notice). Untimed findings.
std::vector<Finding> nvml_changes(const NvmlSnapshot& start, const NvmlSnapshot& end);

nlohmann::json nvml_json(const NvmlSnapshot& s);

/// The text lines of `gpudiag info` for the `nvml` object of nvml_json (a
/// stranger's JSON: every field optional).
std::vector<std::string> nvml_lines(const nlohmann::json& j);

}  // namespace gpudiag::hw
