// cuda_ops.h's helpers that need no CUDA header: error text and the stream wait.
#include <chrono>
#include <thread>

#include "gpu/cuda_ops.h"
#include "util/error.h"

namespace gpudiag {

std::string cuda_error_text(const CudaOps& ops, int code) {
  const char* name = ops.error_name ? ops.error_name(code) : nullptr;
  const char* text = ops.error_string ? ops.error_string(code) : nullptr;
  std::string s = name ? name : "CUDA error " + std::to_string(code);
  if (text && *text) s += std::string(" (") + text + ")";
  return s;
}

void wait_stream(const CudaOps& ops, void* stream, const std::string& what, Deadline deadline) {
  // Spin briefly (most copies finish within microseconds), then yield.
  for (int polls = 0;; ++polls) {
    const int e = ops.stream_query(stream);
    if (e == CudaOps::kSuccess) return;
    if (e != CudaOps::kNotReady)
      throw Error(ExitCode::broken, what + " failed: " + cuda_error_text(ops, e),
                  "check the GPU with nvidia-smi and dmesg (Xid errors)");
    if (deadline.expired())
      throw TimeoutError(what + " did not finish in time on the GPU",
                         "check the GPU with nvidia-smi and dmesg (Xid errors)");
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace gpudiag
