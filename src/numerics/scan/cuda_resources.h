// RAII for the CUDA runtime objects the scanner's host side holds (pinned
// host memory, events), the error check that names the GPU, and the one way
// it waits: polling an event against a deadline, never an unbounded sync.
// Included only by CUDA builds' host files (it includes cuda_runtime.h).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "gpu/cuda.h"
#include "numerics/scan/device_scope.h"
#include "util/deadline.h"
#include "util/error.h"

namespace gpudiag::numerics::cuda_scan {

inline constexpr double kWaitSeconds = 120;

/// A CUDA call failed while the scanner ran: the GPU (or its driver) is
/// broken, not the input, and the scan has no verdict on the data, so the
/// exit status is 5 (not 1, "inf or nan found") and the remedy points at the
/// device, with the CPU scanner as the way around it.
inline void check(cudaError_t e, const std::string& gpu, const std::string& what) {
  if (e != cudaSuccess)
    throw Error(ExitCode::device,
                "CUDA scanner on " + gpu + ": " + what + " failed: " + cudaGetErrorName(e) + " (" +
                    cudaGetErrorString(e) + ")",
                "check the GPU with nvidia-smi and dmesg (Xid, ECC errors), or scan on the CPU "
                "with --device cpu");
}

/// Page-locked host memory: copies from it are truly asynchronous, so the
/// event wait's deadline bounds them (a pageable copy can block in the driver).
class Pinned {
 public:
  Pinned(std::size_t bytes, const std::string& gpu) : bytes_(bytes) {
    check(cudaHostAlloc(&ptr_, bytes, cudaHostAllocDefault), gpu,
          "cudaHostAlloc(" + std::to_string(bytes >> 10) + " KiB)");
  }
  ~Pinned() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

class Event {
 public:
  explicit Event(const std::string& gpu) {
    check(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), gpu, "cudaEventCreate");
  }
  ~Event() {
    if (e_) cudaEventDestroy(e_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

/// Polls `e` until the work recorded before it finished. A CUDA error is
/// Error(broken); the deadline passing sets `hung` and throws TimeoutError
/// saying what did not finish (`what`: "a 64 MiB chunk's copy").
inline void wait_event(cudaEvent_t e, const std::string& gpu, const std::string& what,
                       std::atomic<bool>& hung) {
  const auto deadline = Deadline::after_seconds(kWaitSeconds);
  const auto spin_until = Deadline::Clock::now() + std::chrono::microseconds(200);
  for (;;) {
    const cudaError_t r = cudaEventQuery(e);
    if (r == cudaSuccess) return;
    if (r != cudaErrorNotReady) check(r, gpu, what);
    if (deadline.expired()) {
      hung = true;
      throw TimeoutError("CUDA scanner: " + what + " did not finish within " +
                             std::to_string(static_cast<int>(kWaitSeconds)) + " s on " + gpu,
                         "the GPU may be hung: check nvidia-smi and dmesg for Xid errors, or "
                         "scan on the CPU with --device cpu");
    }
    if (Deadline::Clock::now() > spin_until) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace gpudiag::numerics::cuda_scan
