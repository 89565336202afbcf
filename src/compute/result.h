// What the compute phase measured on one rank (compute/run.h) and what the
// exchange's comparison concluded (compute/judge.h): carried in the rank's
// record, so every checkpoint's table and the job report hold it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "world/nvml_clocks.h"

namespace gpudiag {

/// One precision's GEMM: its checksum (16 hex digits) and how fast it ran.
struct ComputePart {
  std::string name;      ///< "bf16 GEMM", "fp16 GEMM", "fp32 GEMM"
  std::string checksum;  ///< of C's bits and its fp32 sum (compute/math.h)
  double flops = 0;      ///< every repetition's, together
  double seconds = 0;    ///< the GEMMs' own time (CUDA events on a GPU)
  int repeats = 0;
};

struct ComputeRecord {
  /// The ranks compared with each other: the GPU's name ("NVIDIA H200"), or
  /// "CPU <model name>" on the host backend. "" when the phase did not run.
  std::string model;
  std::string device;  ///< "gpu" or "host": where it ran
  /// On a GPU the NVIDIA driver's release ("550.54.15", /proc/driver/nvidia/
  /// version; "" unknown), "" on the host: with `model` and `kernel` the key
  /// of the known checksums (compute/known.h).
  std::string driver;
  int kernel = 0;  ///< compute/math.h's kComputeKernelVersion
  /// The known checksums' verdict: "matches", "differs", "" (no entry for
  /// this model, driver and kernel version, or not run).
  std::string known;
  std::vector<ComputePart> parts;
  double tflops = 0;   ///< all parts' flops over their seconds
  double seconds = 0;  ///< the phase's wall time
  /// The exchange's comparison, as this rank read it: "agrees", "differs"
  /// (not the checksum most GPUs of its model give), "unstable" (changed
  /// between its own repetitions), "alone" (no other rank of its model), ""
  /// (not run, or not compared).
  std::string judged;
  std::string finding;  ///< "differs"/"unstable": the line that says what differs
  /// On a GPU: its SM clock and throttle reasons as the GEMMs ended (NVML),
  /// which a SLOW verdict quotes; unknown on the host backend.
  GpuClocks clocks;

  bool ran() const { return !parts.empty(); }
  /// A verdict on this rank alone (it goes on through the collectives).
  bool failed() const { return judged == "differs" || judged == "unstable"; }
};

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ComputePart, name, checksum, flops, seconds, repeats)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GpuClocks, sm_mhz, sm_max_mhz, events, why)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ComputeRecord, model, device, driver, kernel,
                                                known, parts, tflops, seconds,
                                                judged, finding, clocks)

}  // namespace gpudiag
