#include "numerics/scanner.h"

#include <spdlog/spdlog.h>

#include "util/error.h"

namespace gpudiag::numerics {

std::unique_ptr<Scanner> make_scanner(ScanDevice device, unsigned threads, int gpu) {
  if (device == ScanDevice::cpu) return make_cpu_scanner(threads);
  std::string why_not;
  if (auto cuda = make_cuda_scanner(&why_not, gpu)) return cuda;
  if (device == ScanDevice::cuda)
    throw UsageError("--device cuda: " + why_not, "use --device cpu or --device auto");
  spdlog::info("scan: using the CPU scanner: {}", why_not);
  return make_cpu_scanner(threads);
}

}  // namespace gpudiag::numerics
