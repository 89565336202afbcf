// What the scanner reports for one tensor. The reference detector prints the
// smallest and largest absolute value; the counts are the extras it can switch
// on (|x| >= 1e2/1e3/1e4) plus what mixed-precision debugging asks next: how
// many nan, +inf, -inf, zeros and subnormals.
//
// abs_min/abs_max follow the framework: they are computed in the tensor's own
// dtype (so a signed integer's most negative value stays negative, as
// `x.abs()` wraps it), and any NaN makes both NaN, as torch's min/max
// propagate NaN. The >= thresholds compare the true magnitude |x| exactly.
#pragma once

#include <cstdint>

namespace gpudiag::numerics {

struct TensorStats {
  std::uint64_t count = 0;  ///< elements scanned
  double abs_min = 0;       ///< NaN when nan > 0; meaningless when count == 0
  double abs_max = 0;
  std::uint64_t nan = 0;
  std::uint64_t pos_inf = 0;
  std::uint64_t neg_inf = 0;
  std::uint64_t zero = 0;       ///< +0 and -0
  std::uint64_t subnormal = 0;  ///< nonzero with the smallest exponent (floats only)
  std::uint64_t ge_1e2 = 0;     ///< |x| >= 100 (inf included, NaN not)
  std::uint64_t ge_1e3 = 0;
  std::uint64_t ge_1e4 = 0;

  bool empty() const { return count == 0; }
  bool has_nan() const { return nan > 0; }
  bool has_inf() const { return pos_inf + neg_inf > 0; }
};

/// The statistics of the union of two disjoint parts of one tensor.
TensorStats merge(const TensorStats& a, const TensorStats& b);

/// Field-by-field equality where NaN equals NaN (for tests and cross-checks
/// between scanner backends).
bool same_stats(const TensorStats& a, const TensorStats& b);

}  // namespace gpudiag::numerics
