// make_cuda_scanner and the device scans for builds without the CUDA toolkit.
#include "numerics/scan/scanner.h"
#include "util/error.h"

namespace gpudiag::numerics {

std::unique_ptr<Scanner> make_cuda_scanner(std::string* why_not, int /*gpu*/, FileReader) {
  if (why_not)
    *why_not = "this gpudiag was built without CUDA (no toolkit found at configure time)";
  return nullptr;
}

TensorStats scan_device_buffer(const void*, std::uint64_t, DType, void*, int) {
  throw Error(ExitCode::usage, "this gpudiag was built without CUDA: it cannot scan device memory",
              "scan on the host, or use a build made with the CUDA toolkit");
}

void scan_device_tensors(std::span<const TensorView>, void*, int, TensorStats*, std::uint64_t*) {
  throw Error(ExitCode::usage, "this gpudiag was built without CUDA: it cannot checksum device memory",
              "checksum on the host, or use a build made with the CUDA toolkit");
}

}  // namespace gpudiag::numerics
