// cuda_scan::decode (cuda_scan_kernel.h): the kernel's per-tensor
// accumulator turned into TensorStats with the CPU scanner's dtype tables.
// Plain C++, built with or without CUDA, so the host test of the kernel's
// lanes (cuda_scan_lanes_test.cpp) decodes exactly as the scanner does.
#include <limits>

#include "numerics/scan/cuda_scan_kernel.h"

namespace gpudiag::numerics {

TensorStats cuda_scan::decode(const Accumulator& a, DType t, std::uint64_t count) {
  TensorStats s;
  s.count = count;
  s.nan = a.nan, s.pos_inf = a.pos_inf, s.neg_inf = a.neg_inf, s.zero = a.zero;
  s.subnormal = a.subnormal, s.ge_1e2 = a.ge[0], s.ge_1e3 = a.ge[1], s.ge_1e4 = a.ge[2];
  const std::uint64_t lo = ~a.inv_lo, hi = a.hi, sign = std::uint64_t{1} << 63;
  switch (dtype_kind(t)) {
    case DKind::floating:
      // NaN patterns are above every threshold pattern: take them back out.
      s.ge_1e2 -= s.nan, s.ge_1e3 -= s.nan, s.ge_1e4 -= s.nan;
      if (s.nan > 0) {
        s.abs_min = s.abs_max = std::numeric_limits<double>::quiet_NaN();
      } else {
        s.abs_min = float_bits_to_double(t, lo);
        s.abs_max = float_bits_to_double(t, hi);
      }
      break;
    case DKind::signed_int:
      s.abs_min = static_cast<double>(static_cast<long long>(lo ^ sign));
      s.abs_max = static_cast<double>(static_cast<long long>(hi ^ sign));
      break;
    default:
      s.abs_min = static_cast<double>(lo);
      s.abs_max = static_cast<double>(hi);
  }
  return s;
}

}  // namespace gpudiag::numerics
