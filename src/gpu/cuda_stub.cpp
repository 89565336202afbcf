// gpu/cuda.h for a build without the CUDA toolkit: the probe says so, and
// everything else reports that this build cannot touch a GPU.
#include "gpu/cuda.h"
#include "util/error.h"

namespace gpudiag {

namespace {
[[noreturn]] void no_cuda() {
  throw Error(ExitCode::broken, "this gpudiag was built without CUDA",
              "rebuild with the CUDA toolkit found (set CUDA_HOME), or use --backend host");
}
}  // namespace

CudaStatus probe_cuda() {
  CudaStatus s;
  s.error = "this gpudiag was built without CUDA; rebuild with CUDA_HOME set";
  return s;
}
std::string cuda_version_string(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}
GpuInfo gpu_info(int) { no_cuda(); }
void set_device(int) { no_cuda(); }
DeviceBuffer::DeviceBuffer(std::size_t) { no_cuda(); }
DeviceBuffer::~DeviceBuffer() = default;
Stream::Stream() { no_cuda(); }
Stream::~Stream() = default;
bool Stream::done() const { return true; }
void copy_to_device(void*, const void*, std::size_t) { no_cuda(); }
void copy_to_host(void*, const void*, std::size_t) { no_cuda(); }
std::uint64_t fill_and_verify_pattern(void*, std::size_t, std::uint32_t) { no_cuda(); }

}  // namespace gpudiag
