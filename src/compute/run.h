// The compute phase on one rank: the three GEMMs of compute/math.h (bf16 and
// fp16 with fp32 accumulation, fp32), each repeated until its share of the
// phase's seconds has passed (twice at least), on the GPU (gpu/compute_gemm.h)
// or, on the host backend, on the CPU (compute/arith.h). Every repetition must
// give the first one's checksum: one that does not marks the rank "unstable"
// on its own, before any comparison with its peers.
#pragma once

#include <string>

#include "compute/result.h"
#include "util/deadline.h"

namespace gpudiag {

/// The GEMMs' sizes: a GPU's take a few milliseconds each, the CPU's about one.
inline constexpr int kGpuComputeN = 4096;
inline constexpr int kHostComputeN = 64;
/// --compute-seconds defaults.
inline constexpr double kGpuComputeSeconds = 1.5;
inline constexpr double kHostComputeSeconds = 0.1;

struct ComputeOptions {
  bool gpu = false;      ///< on the current GPU, else on the CPU
  double seconds = 0;    ///< the phase's budget, shared by the three GEMMs
  int n = 0;             ///< 0: kGpuComputeN or kHostComputeN
  bool flip = false;     ///< GPUDIAG_TEST_RAISE=FLIP@compute: flip a bit of C every time
  std::string model;     ///< what the rank is compared within (ComputeRecord::model)
  Deadline deadline = Deadline::after_seconds(3600);  ///< for the GPU's waits
};

/// Runs the phase; throws Error on a CUDA error (a TimeoutError past the
/// deadline). `judged` is "unstable" with its finding when a repetition
/// differed from the first, else "".
ComputeRecord run_compute(const ComputeOptions& o);

/// "CPU <model name>" from /proc/cpuinfo ("CPU" when it has none).
std::string cpu_model();

}  // namespace gpudiag
