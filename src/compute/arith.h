// The compute check's arithmetic on the CPU (compute/math.h defines it): the
// host backend's GEMMs, and the reduction that turns C into a checksum, which
// the GPU path finishes here too from its blocks' partial sums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "compute/math.h"

namespace gpudiag::compute {

/// "bf16", "fp16", "fp32".
const char* precision_name(Precision p);

/// C = A x B (n x n, row-major) with math.h's inputs at precision `p`: one
/// fp32 fused multiply-add per k, in order. `n` a multiple of 16.
std::vector<float> cpu_gemm(Precision p, int n);

/// The checksum of `count` fp32 values (math.h's geometry, on the CPU).
std::uint64_t checksum(const float* c, std::size_t count);

/// The checksum from the blocks' partials (kReduceBlocks of each), as the
/// GPU's reduction leaves them: the blocks' fp32 sums added in order.
std::uint64_t finish_checksum(const std::uint64_t* hashes, const float* sums);

/// "0123456789abcdef".
std::string hex64(std::uint64_t v);

/// Flips GPUDIAG_TEST_RAISE=FLIP@compute's bit of C (n x n).
void flip_bit(float* c, int n);

}  // namespace gpudiag::compute
