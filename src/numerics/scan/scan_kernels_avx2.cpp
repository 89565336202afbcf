// The loops of scan_kernels_impl.h built with -mavx2 (see CMakeLists.txt):
// called by scan_range and checksum_sum only on a processor that has AVX2.
#include "numerics/scan/scan_kernels_impl.h"

namespace gpudiag::numerics {

TensorStats scan_range_avx2(const TensorView& v, std::uint64_t begin, std::uint64_t end,
                            std::uint64_t* sum) {
  return scan_range_here(v, begin, end, sum);
}

std::uint64_t checksum_sum_avx2(const std::uint8_t* tensor, std::uint64_t begin,
                                std::uint64_t end) {
  return checksum_sum_here(tensor, begin, end);
}

}  // namespace gpudiag::numerics
