// The CUDA scanner's way onto a device from a caller's thread (the C ABI runs
// inside a training process): DeviceScope makes `device`'s primary context
// current for a scope and puts back exactly what the thread had, its own
// context or none. It goes through the driver (cuCtxGetCurrent,
// cuCtxSetCurrent, cuDevicePrimaryCtxRetain, reached with
// cudaGetDriverEntryPointByVersion, so nothing links libcuda), never
// cudaSetDevice: since CUDA 12 cudaSetDevice initialises the device's primary
// context, and restoring a thread that never chose a device with
// cudaSetDevice(0) would put a context on GPU 0 in every rank. The runtime
// uses whatever context is current, so the scanner's runtime calls land on
// `device`. Each primary context is retained once and kept for the process
// (the scanner's buffers live in it). Where the driver's entry points cannot
// be had, it falls back to cudaGetDevice/cudaSetDevice.
//
// CaptureGuard refuses a stream that is capturing a CUDA graph (the scan waits
// on the GPU, which capture forbids) and puts this thread in the relaxed
// capture mode for the scope, so the scanner's own allocations and waits do
// not invalidate a capture another stream is making.
#pragma once

#include <cuda_runtime.h>

namespace gpudiag::numerics::cuda_scan {

class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  void* saved_ctx_ = nullptr;  ///< the thread's context before (CUcontext; null: none)
  bool switched_ = false;      ///< the driver path changed the current context
  int saved_device_ = -1;      ///< the fallback path's device to restore
};

class CaptureGuard {
 public:
  /// Throws Error (usage) when `stream` is capturing.
  CaptureGuard(cudaStream_t stream, int device);
  ~CaptureGuard();
  CaptureGuard(const CaptureGuard&) = delete;
  CaptureGuard& operator=(const CaptureGuard&) = delete;

 private:
  cudaStreamCaptureMode saved_ = cudaStreamCaptureModeRelaxed;
  bool exchanged_ = false;
};

}  // namespace gpudiag::numerics::cuda_scan
