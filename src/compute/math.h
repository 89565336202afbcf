// The compute check's arithmetic that the CPU (compute/arith.cpp) and the GPU
// (gpu/compute_gemm.cu) share, so both run exactly the same definition:
//
//   inputs     A (n x n) and B (n x n) from a fixed seed, element i of each a
//              pure function of (matrix, i): a random sign, a magnitude in
//              [0.25, 2) and every mantissa bit the precision has, so the
//              products and sums round and exercise the whole datapath;
//              bf16 and fp16 inputs are the same draw at their own widths
//   GEMM       C = A x B with fp32 accumulation; on the CPU one fused
//              multiply-add per k in order 0..n-1 (the fp32 kernel's order);
//              tensor cores accumulate their own way, fixed per GPU model
//   checksum   over C's bits in a fixed geometry of kReduceBlocks blocks of
//              kReduceThreads threads (thread t of block b takes elements
//              b*kReduceThreads+t, then every kReduceBlocks*kReduceThreads-th):
//              an integer sum of mix64(index, bits) (order-free) and an fp32
//              sum (sequential per thread, a halving tree per block, the
//              blocks in order), so the reduction's own rounding is fixed too
//
// Everything here is constexpr bit arithmetic, callable from host and device.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GPUDIAG_HD __host__ __device__
#else
#define GPUDIAG_HD
#endif

namespace gpudiag::compute {

enum class Precision { bf16, fp16, fp32 };

/// The version of this arithmetic (inputs, GEMMs, their sizes in run.h,
/// checksum), keyed with each entry of data/compute-checksums.json: bump it
/// whenever anything here, in arith.cpp or in gpu/compute_kernels.cuh and
/// compute_gemm.cu changes a single result bit, so no old known checksum is
/// compared with the new arithmetic's.
inline constexpr int kComputeKernelVersion = 1;

inline constexpr std::uint64_t kSeed = 0x6770756469616721ull;  // "gpudiag!"
inline constexpr int kReduceBlocks = 256;
inline constexpr int kReduceThreads = 256;

/// splitmix64's finalizer: every input bit reaches every output bit.
GPUDIAG_HD constexpr std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The draw behind element i of matrix `which` (0: A, 1: B).
GPUDIAG_HD constexpr std::uint64_t draw(int which, std::uint64_t i) {
  return mix64(kSeed ^ (static_cast<std::uint64_t>(which + 1) << 56) ^ (i * 0x9e3779b97f4a7c15ull));
}

/// fp32 input: sign, exponent 2^-2..2^0, 23 random mantissa bits.
GPUDIAG_HD constexpr std::uint32_t input_fp32(int which, std::uint64_t i) {
  const std::uint64_t h = draw(which, i);
  const auto sign = static_cast<std::uint32_t>(h >> 63) << 31;
  const auto exponent = static_cast<std::uint32_t>(125 + (h >> 32) % 3) << 23;
  return sign | exponent | static_cast<std::uint32_t>(h & 0x7fffff);
}

/// bf16 input: the fp32 draw's top half (7 mantissa bits), so it is exact.
GPUDIAG_HD constexpr std::uint16_t input_bf16(int which, std::uint64_t i) {
  return static_cast<std::uint16_t>(input_fp32(which, i) >> 16);
}

/// fp16 input: sign, exponent 2^-2..2^0, 10 random mantissa bits.
GPUDIAG_HD constexpr std::uint16_t input_fp16(int which, std::uint64_t i) {
  const std::uint64_t h = draw(which, i);
  const auto sign = static_cast<std::uint32_t>(h >> 63) << 15;
  const auto exponent = static_cast<std::uint32_t>(13 + (h >> 32) % 3) << 10;
  return static_cast<std::uint16_t>(sign | exponent | static_cast<std::uint32_t>(h & 0x3ff));
}

/// A bf16 as fp32 bits (exact).
GPUDIAG_HD constexpr std::uint32_t bf16_to_fp32(std::uint16_t b) {
  return static_cast<std::uint32_t>(b) << 16;
}

/// A normal fp16 as fp32 bits (exact; the inputs are never subnormal, inf or nan).
GPUDIAG_HD constexpr std::uint32_t fp16_to_fp32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  const std::uint32_t exponent = ((h >> 10) & 0x1f) - 15 + 127;
  return sign | exponent << 23 | static_cast<std::uint32_t>(h & 0x3ff) << 13;
}

/// Input element i of matrix `which` at precision `p`, as the fp32 bits it multiplies as.
GPUDIAG_HD constexpr std::uint32_t input_as_fp32(Precision p, int which, std::uint64_t i) {
  return p == Precision::bf16   ? bf16_to_fp32(input_bf16(which, i))
         : p == Precision::fp16 ? fp16_to_fp32(input_fp16(which, i))
                                : input_fp32(which, i);
}

/// One element's share of the integer half of the checksum.
GPUDIAG_HD constexpr std::uint64_t element_hash(std::uint64_t i, std::uint32_t bits) {
  return mix64((i << 32) ^ bits ^ 0x5bd1e995ull);
}

/// The checksum from the integer sum and the fp32 sum's bits.
GPUDIAG_HD constexpr std::uint64_t combine(std::uint64_t hash_sum, std::uint32_t float_sum_bits) {
  return hash_sum ^ mix64(float_sum_bits | (1ull << 40));
}

/// The element of C whose bit GPUDIAG_TEST_RAISE=FLIP@compute flips, and the bit.
GPUDIAG_HD constexpr std::uint64_t flip_index(std::uint64_t n) { return (n * n) / 3; }
inline constexpr std::uint32_t kFlipBit = 1u << 4;

}  // namespace gpudiag::compute
