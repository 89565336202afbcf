// The checksum kernel's per-thread work (cuda_checksum_kernel.cu), written
// for both compilers like cuda_scan_lanes.h: nvcc inlines it into the kernel,
// and cuda_checksum_lanes_test.cpp runs it on the host for every thread of a
// block against the CPU's checksum, so its arithmetic is tested without a GPU.
//
// The layout is the statistics kernel's (cuda_scan_kernel.h): a segment's
// tiles of kTileBytes from its address rounded down to 16 bytes, each thread
// owning kUnroll 16-byte vectors of a tile. A vector wholly inside a tensor
// whose address is a multiple of 4 is four whole words (checksum.h: word k
// times m_k); every other vector that touches the tensor (its head and tail,
// or all of a tensor not 4-byte aligned) adds its bytes one by one, byte j of
// word k as (b << 8j) * m_k, which sums to the same.
#pragma once

#include <cstdint>

#include "numerics/scan/checksum.h"
#include "numerics/scan/cuda_scan_lanes.h"

namespace gpudiag::numerics::cuda_scan::lanes {

/// Bytes per element of a DType, on either side.
GPUDIAG_LANES std::uint64_t element_bytes(std::uint8_t dtype) {
  switch (static_cast<DType>(dtype)) {
    case DType::F64:
    case DType::I64:
    case DType::U64:
      return 8;
    case DType::F32:
    case DType::I32:
    case DType::U32:
      return 4;
    case DType::F16:
    case DType::BF16:
    case DType::I16:
    case DType::U16:
      return 2;
    default:
      return 1;
  }
}

/// Four whole words of one vector, the first being word k of the tensor.
GPUDIAG_LANES std::uint64_t checksum_vector(Vec16 v, std::uint64_t k) {
  std::uint32_t m = static_cast<std::uint32_t>(k + 1) * kChecksumStep;
  // w * (2m + 1), checksum.h's multiplier, as (w * m << 1) + w.
  std::uint64_t s = (std::uint64_t{v.x} * m << 1) + v.x;
  m += kChecksumStep;
  s += (std::uint64_t{v.y} * m << 1) + v.y;
  m += kChecksumStep;
  s += (std::uint64_t{v.z} * m << 1) + v.z;
  m += kChecksumStep;
  return s + (std::uint64_t{v.w} * m << 1) + v.w;
}

/// The bytes of [q, q + 16) that lie in [begin, end), one at a time.
GPUDIAG_LANES std::uint64_t checksum_bytes(std::uint64_t q, std::uint64_t begin,
                                           std::uint64_t end) {
  std::uint64_t s = 0;
  for (std::uint64_t e = greater(q, begin); e < lesser(q + kVectorBytes, end); ++e)
    s += checksum_byte(*reinterpret_cast<const std::uint8_t*>(e), e - begin);
  return s;
}

/// Tiles [t0, t1) of `seg` (relative to the segment): this thread's part of
/// the tensor's checksum sum.
GPUDIAG_LANES std::uint64_t checksum_run(const Segment& seg, std::uint64_t t0, std::uint64_t t1,
                                         unsigned tid) {
  const std::uint64_t begin = seg.ptr, end = begin + seg.count * element_bytes(seg.dtype);
  const std::uint64_t base = begin & ~std::uint64_t{kVectorBytes - 1};
  const bool words = begin % 4 == 0;
  std::uint64_t s = 0;
  for (std::uint64_t t = t0; t < t1; ++t) {
    const std::uint64_t tile = base + t * kTileBytes;
    const std::uint64_t mine = tile + std::uint64_t{tid} * kVectorBytes;
    if (words && tile >= begin && tile + kTileBytes <= end) {  // the whole tile: loads first
      Vec16 v[kUnroll];
      GPUDIAG_UNROLL
      for (int k = 0; k < kUnroll; ++k)
        v[k] = load_vector(mine + static_cast<std::uint64_t>(k) * kThreads * kVectorBytes);
      GPUDIAG_UNROLL
      for (int k = 0; k < kUnroll; ++k)
        s += checksum_vector(
            v[k], (mine + static_cast<std::uint64_t>(k) * kThreads * kVectorBytes - begin) / 4);
      continue;
    }
    GPUDIAG_UNROLL
    for (int k = 0; k < kUnroll; ++k) {
      const std::uint64_t q = mine + static_cast<std::uint64_t>(k) * kThreads * kVectorBytes;
      if (words && q >= begin && q + kVectorBytes <= end)
        s += checksum_vector(load_vector(q), (q - begin) / 4);
      else if (q + kVectorBytes > begin && q < end)
        s += checksum_bytes(q, begin, end);
    }
  }
  return s;
}

}  // namespace gpudiag::numerics::cuda_scan::lanes
