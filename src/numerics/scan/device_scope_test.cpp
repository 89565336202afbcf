// The CUDA scanner's device and capture rules (device_scope.h), through
// scan_device_buffer, the call behind the C ABI's gpudiag_scan_device: on a
// thread that never chose a device, a scan leaves it with no current
// context (no context made on a GPU the caller never chose); on a thread
// whose own context is current, that context is current again after; a
// stream capturing a CUDA graph is refused with a one-line error and the
// capture stays valid. GPU only: skipped, saying why, without one.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "gpu/cuda.h"
#include "numerics/scan/scanner.h"
#include "util/error.h"

namespace gpudiag::numerics {
namespace {

using CtxGet = int (*)(void**);

CtxGet ctx_get() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult st{};
  if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 4000, cudaEnableDefault, &st) !=
          cudaSuccess ||
      st != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<CtxGet>(fn);
}

#define NEED_GPU()                                                                        \
  const CudaStatus status = probe_cuda();                                                 \
  if (!status.usable)                                                                     \
  GTEST_SKIP() << "no usable GPU: " << (status.error.empty() ? "no CUDA" : status.error)

TEST(CudaScanDeviceScope, AThreadWithoutADeviceIsLeftWithoutAContext) {
  NEED_GPU();
  const int last = status.device_count - 1;
  void* buf = nullptr;
  {
    set_device(last);
    ASSERT_EQ(cudaMalloc(&buf, 4096), cudaSuccess);
    ASSERT_EQ(cudaMemset(buf, 0, 4096), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  const CtxGet get = ctx_get();
  ASSERT_NE(get, nullptr) << "cuCtxGetCurrent not reachable";
  void* before = reinterpret_cast<void*>(1);
  void* after = reinterpret_cast<void*>(1);
  std::string error;
  std::thread t([&] {
    get(&before);  // a new thread: no context current
    try {
      (void)scan_device_buffer(buf, 1024, DType::F32, nullptr, last);
    } catch (const std::exception& e) {
      error = e.what();
    }
    get(&after);
  });
  t.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(before, nullptr);
  EXPECT_EQ(after, nullptr) << "the scan left a context current on a thread that had none";
  cudaFree(buf);
}

TEST(CudaScanDeviceScope, TheCallersContextIsCurrentAgainAfter) {
  NEED_GPU();
  set_device(0);
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 4096), cudaSuccess);
  ASSERT_EQ(cudaMemset(buf, 0, 4096), cudaSuccess);
  const CtxGet get = ctx_get();
  ASSERT_NE(get, nullptr);
  void *before = nullptr, *after = nullptr;
  get(&before);
  ASSERT_NE(before, nullptr);
  (void)scan_device_buffer(buf, 1024, DType::F32, nullptr, status.device_count - 1);
  get(&after);
  EXPECT_EQ(after, before);
  int dev = -1;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  EXPECT_EQ(dev, 0);
  cudaFree(buf);
}

TEST(CudaScanDeviceScope, AStreamCapturingAGraphIsRefusedAndTheCaptureSurvives) {
  NEED_GPU();
  set_device(0);
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 4096), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(buf, 0, 4096, s), cudaSuccess);
  try {
    (void)scan_device_buffer(buf, 1024, DType::F32, s, 0);
    ADD_FAILURE() << "a capturing stream was scanned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("capturing a CUDA graph"), std::string::npos) << e.what();
  }
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess) << "the capture was invalidated";
  if (graph) cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  cudaFree(buf);
}

}  // namespace
}  // namespace gpudiag::numerics
