// Test-only: the obvious, element-at-a-time scan that the fast scanners are
// checked against. It decodes every element to double with its own decoders
// (not the ones in dtype.cpp) and classifies values arithmetically.
#pragma once

#include "numerics/scan/tensor.h"
#include "numerics/scan/tensor_stats.h"

namespace gpudiag::numerics::testing {

/// The value of element `i` of `v` as a double (floats and integers; bool as 0/1).
double reference_value(const TensorView& v, std::uint64_t i);

/// TensorStats of `v` computed one element at a time.
TensorStats reference_scan(const TensorView& v);

}  // namespace gpudiag::numerics::testing
