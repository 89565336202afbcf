// scan_range and checksum_sum: the loops of scan_kernels_impl.h built for the
// baseline instruction set here, and for AVX2 in scan_kernels_avx2.cpp; on
// x86-64 the AVX2 copy runs when the processor has it (checked once).
#include "numerics/scan/scan_kernels_impl.h"

namespace gpudiag::numerics {

TensorStats scan_range_baseline(const TensorView& v, std::uint64_t begin, std::uint64_t end,
                                std::uint64_t* sum) {
  return scan_range_here(v, begin, end, sum);
}

std::uint64_t checksum_sum_baseline(const std::uint8_t* tensor, std::uint64_t begin,
                                    std::uint64_t end) {
  return checksum_sum_here(tensor, begin, end);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
TensorStats scan_range_avx2(const TensorView& v, std::uint64_t begin, std::uint64_t end,
                            std::uint64_t* sum);
std::uint64_t checksum_sum_avx2(const std::uint8_t* tensor, std::uint64_t begin, std::uint64_t end);

namespace {
const bool kHaveAvx2 = __builtin_cpu_supports("avx2");
}

TensorStats scan_range(const TensorView& v, std::uint64_t begin, std::uint64_t end,
                       std::uint64_t* sum) {
  return kHaveAvx2 ? scan_range_avx2(v, begin, end, sum) : scan_range_here(v, begin, end, sum);
}

std::uint64_t checksum_sum(const std::uint8_t* tensor, std::uint64_t begin, std::uint64_t end) {
  return kHaveAvx2 ? checksum_sum_avx2(tensor, begin, end) : checksum_sum_here(tensor, begin, end);
}

const char* scan_kernel_isa() { return kHaveAvx2 ? "avx2" : "sse2"; }
#else
TensorStats scan_range(const TensorView& v, std::uint64_t begin, std::uint64_t end,
                       std::uint64_t* sum) {
  return scan_range_here(v, begin, end, sum);
}

std::uint64_t checksum_sum(const std::uint8_t* tensor, std::uint64_t begin, std::uint64_t end) {
  return checksum_sum_here(tensor, begin, end);
}

const char* scan_kernel_isa() { return "generic"; }
#endif

}  // namespace gpudiag::numerics
