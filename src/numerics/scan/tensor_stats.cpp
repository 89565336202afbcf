#include "numerics/scan/tensor_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gpudiag::numerics {

TensorStats merge(const TensorStats& a, const TensorStats& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  TensorStats m;
  m.count = a.count + b.count;
  m.nan = a.nan + b.nan;
  m.pos_inf = a.pos_inf + b.pos_inf;
  m.neg_inf = a.neg_inf + b.neg_inf;
  m.zero = a.zero + b.zero;
  m.subnormal = a.subnormal + b.subnormal;
  m.ge_1e2 = a.ge_1e2 + b.ge_1e2;
  m.ge_1e3 = a.ge_1e3 + b.ge_1e3;
  m.ge_1e4 = a.ge_1e4 + b.ge_1e4;
  if (m.nan > 0) {
    m.abs_min = m.abs_max = std::numeric_limits<double>::quiet_NaN();
  } else {
    m.abs_min = std::min(a.abs_min, b.abs_min);
    m.abs_max = std::max(a.abs_max, b.abs_max);
  }
  return m;
}

bool same_stats(const TensorStats& a, const TensorStats& b) {
  auto same = [](double x, double y) { return (std::isnan(x) && std::isnan(y)) || x == y; };
  if (a.count != b.count) return false;
  if (a.count > 0 && (!same(a.abs_min, b.abs_min) || !same(a.abs_max, b.abs_max))) return false;
  return a.nan == b.nan && a.pos_inf == b.pos_inf && a.neg_inf == b.neg_inf && a.zero == b.zero &&
         a.subnormal == b.subnormal && a.ge_1e2 == b.ge_1e2 && a.ge_1e3 == b.ge_1e3 &&
         a.ge_1e4 == b.ge_1e4;
}

}  // namespace gpudiag::numerics
