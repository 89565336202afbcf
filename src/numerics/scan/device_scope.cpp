// DeviceScope and CaptureGuard (device_scope.h): driver entry points found
// once, primary contexts retained once per device.
#include "numerics/scan/device_scope.h"

#include <mutex>
#include <string>
#include <vector>

#include "gpu/cuda.h"
#include "util/error.h"

namespace gpudiag::numerics::cuda_scan {

namespace {

using CtxGet = int (*)(void** ctx);
using CtxSet = int (*)(void* ctx);
using DeviceGet = int (*)(int* dev, int ordinal);
using PrimaryRetain = int (*)(void** ctx, int dev);

struct Driver {
  CtxGet ctx_get = nullptr;
  CtxSet ctx_set = nullptr;
  DeviceGet device_get = nullptr;
  PrimaryRetain retain = nullptr;
  bool usable() const { return ctx_get && ctx_set && device_get && retain; }
};

template <class F>
void entry(const char* name, F& slot) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  // 4000: the ABI version of these four calls (CUDA 4.0), as cudaTypedefs.h
  // names them. cudaGetDriverEntryPointByVersion arrived in CUDA 12.5, and
  // CUDA 13 dropped the call without a version, which 12.0-12.4 have.
#if CUDART_VERSION >= 12050
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, 4000, cudaEnableDefault, &status);
#else
  const cudaError_t e = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &status);
#endif
  if (e == cudaSuccess && status == cudaDriverEntryPointSuccess)
    slot = reinterpret_cast<F>(fn);
}

const Driver& driver() {
  static const Driver d = [] {
    Driver x;
    entry("cuCtxGetCurrent", x.ctx_get);
    entry("cuCtxSetCurrent", x.ctx_set);
    entry("cuDeviceGet", x.device_get);
    entry("cuDevicePrimaryCtxRetain", x.retain);
    return x;
  }();
  return d;
}

/// `ordinal`'s primary context, retained on first use and kept; null on failure.
void* primary_context(int ordinal) {
  static std::mutex m;
  static std::vector<void*> contexts;
  std::lock_guard<std::mutex> lock(m);
  if (ordinal < 0 || ordinal >= 4096) return nullptr;
  if (contexts.size() <= static_cast<std::size_t>(ordinal)) contexts.resize(ordinal + 1, nullptr);
  void*& ctx = contexts[ordinal];
  int dev = 0;
  if (!ctx && driver().device_get(&dev, ordinal) == 0 && driver().retain(&ctx, dev) != 0)
    ctx = nullptr;
  return ctx;
}

}  // namespace

DeviceScope::DeviceScope(int device) {
  const Driver& d = driver();
  if (d.usable() && d.ctx_get(&saved_ctx_) == 0) {
    void* target = primary_context(device);
    if (target) {
      if (target != saved_ctx_) {
        if (d.ctx_set(target) != 0)
          throw Error(ExitCode::device, "cuCtxSetCurrent failed for CUDA device " +
                                            std::to_string(device));
        switched_ = true;
      }
      return;
    }
  }
  // Without the driver's entry points: the runtime's own way.
  if (cudaGetDevice(&saved_device_) != cudaSuccess) saved_device_ = -1;
  set_device(device);
}

DeviceScope::~DeviceScope() {
  if (switched_) {
    (void)driver().ctx_set(saved_ctx_);  // null: the thread had no context, and has none again
  } else if (saved_device_ >= 0) {
    (void)cudaSetDevice(saved_device_);
  }
}

CaptureGuard::CaptureGuard(cudaStream_t stream, int device) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamIsCapturing(stream, &status);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(ExitCode::usage,
                "the stream given for CUDA device " + std::to_string(device) +
                    " cannot be used: cudaStreamIsCapturing: " + cudaGetErrorName(e),
                "pass a valid stream of that device (or 0 for the default stream)");
  }
  if (status != cudaStreamCaptureStatusNone)
    throw Error(ExitCode::usage,
                "the stream is capturing a CUDA graph: a scan waits for the GPU, which "
                "capture forbids",
                "scan outside the captured region (before capture, or after replaying the graph)");
  saved_ = cudaStreamCaptureModeRelaxed;
  exchanged_ = cudaThreadExchangeStreamCaptureMode(&saved_) == cudaSuccess;
}

CaptureGuard::~CaptureGuard() {
  if (exchanged_) (void)cudaThreadExchangeStreamCaptureMode(&saved_);
}

}  // namespace gpudiag::numerics::cuda_scan
