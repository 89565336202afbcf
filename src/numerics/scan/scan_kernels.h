// The CPU scan of one contiguous range of a tensor: one pass computing every
// TensorStats field. The CPU scanner splits tensors into ranges, runs this on
// its threads and merges the results.
#pragma once

#include <cstdint>

#include "numerics/scan/tensor.h"
#include "numerics/scan/tensor_stats.h"

namespace gpudiag::numerics {

/// Statistics of elements [begin, end) of `v` (end <= v.count).
///
/// Floats are scanned as integer bit patterns: with the sign cleared they
/// order like |x|, so min/max and every class test (nan, inf, zero,
/// subnormal, |x| >= threshold) are integer compares that compile to SIMD.
/// Misaligned or big-endian data is copied a block at a time (byte-swapped
/// as needed) into a small stack buffer first.
///
/// With `sum`, also adds the checksum sum (checksum.h) of the elements' stored
/// bytes to *sum, block by block in the same pass; begin * dtype size must
/// then be a multiple of 4.
TensorStats scan_range(const TensorView& v, std::uint64_t begin, std::uint64_t end,
                       std::uint64_t* sum = nullptr);

/// The same loops built for the baseline instruction set, whatever the
/// processor has (scan_range may run an AVX2 copy): for tests that compare both.
TensorStats scan_range_baseline(const TensorView& v, std::uint64_t begin, std::uint64_t end,
                                std::uint64_t* sum = nullptr);

/// checksum_sum (checksum.h) built for the baseline instruction set.
std::uint64_t checksum_sum_baseline(const std::uint8_t* tensor, std::uint64_t begin,
                                    std::uint64_t end);

/// The instruction set scan_range's loops run with here: "avx2", "sse2", "generic".
const char* scan_kernel_isa();

}  // namespace gpudiag::numerics
