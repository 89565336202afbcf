// Why the CUDA runtime could not start, in one line a user can act on.
//
// The runtime's error code alone sends people the wrong way: an HGX node
// whose nvidia-fabricmanager is not running fails CUDA init with
// cudaErrorSystemNotReady, not "no device"; a driver older than the
// runtime the binary was built with fails with cudaErrorInsufficientDriver,
// and the fix is a toolkit the driver supports or the forward-compatibility
// package, not CUDA_VISIBLE_DEVICES. explain_cuda_failure() names the likely
// causes in order from the code and a few facts about the host.
#pragma once

#include <string>

namespace gpudiag {

struct CudaFacts {
  int error = 0;               ///< cudaError_t of the failed call (0: none, e.g. 0 devices)
  std::string error_name;      ///< "cudaErrorInsufficientDriver"
  int driver_cuda = 0;         ///< cudaDriverGetVersion: CUDA the driver supports; 0 = no libcuda
  int runtime_cuda = 0;        ///< CUDART_VERSION this binary was built with
  std::string driver_release;  ///< "580.65.06", from /proc/driver/nvidia/version ("" unknown)
  bool nvswitch = false;       ///< NVSwitch devices present (HGX): fabric manager needed
  bool device_nodes = false;   ///< /dev/nvidia0 exists
  std::string visible;         ///< "CUDA_VISIBLE_DEVICES=..." or "CUDA_VISIBLE_DEVICES unset"
};

/// "what happened; try: what to do" on one line.
std::string explain_cuda_failure(const CudaFacts& f);

/// Fills the host facts (driver release, NVSwitch, device nodes, visible).
void read_host_gpu_facts(CudaFacts& f);

/// The oldest Linux driver branch for a CUDA major version (13 -> "580"), "" unknown.
std::string min_driver_for(int cuda_major);

}  // namespace gpudiag
