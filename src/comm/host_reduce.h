// Element-wise reductions on host memory for every DType and RedOp, shared by
// the host backends (host/tcp's ring, host/mpi's user ops for half and
// bfloat16) and the bench's expected values.
//
// Integers wrap in two's complement, as NCCL's kernels do. half and bfloat16
// are reduced in float and rounded to nearest even after every step, as
// NCCL reduces them pairwise. `avg` accumulates as a sum; finish_avg()
// divides once at the end (integers: truncating division of the wrapped
// sum; floating types: multiply by 1/n in the type's precision).
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/collective.h"

namespace gpudiag {

/// dst[i] = op(dst[i], src[i]) for i in [0, count); avg reduces as sum.
void reduce_into(void* dst, const void* src, std::size_t count, DType type, RedOp op);

/// After an avg's sum over `nranks` contributions: the average.
void finish_avg(void* data, std::size_t count, DType type, int nranks);

float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);  ///< round to nearest even; inf/nan kept
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_bf16(float f);  ///< round to nearest even; nan stays nan

/// Element i of `data` as a double (for messages and comparisons).
double element_as_double(const void* data, std::size_t i, DType type);

}  // namespace gpudiag
