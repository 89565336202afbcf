// make_cuda_scanner for builds without the CUDA toolkit.
#include "numerics/scanner.h"

namespace gpudiag::numerics {

std::unique_ptr<Scanner> make_cuda_scanner(std::string* why_not, int /*gpu*/) {
  if (why_not)
    *why_not = "this gpudiag was built without CUDA (no toolkit found at configure time)";
  return nullptr;
}

}  // namespace gpudiag::numerics
