// The CUDA scan kernel's building blocks (see cuda_scan_lanes.h, which folds
// with them): a 16-byte load, byte permutes and two-lane min/max, each the
// one GPU instruction under nvcc and a loop in plain C++; the per-dtype
// constants in key space (Params); and what a thread accumulates (Acc) and a
// block reduces (Flush, merged by MergeFlush).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "numerics/scan/cuda_scan_kernel.h"

#if defined(__CUDACC__)
#define GPUDIAG_LANES __host__ __device__ __forceinline__
#define GPUDIAG_UNROLL _Pragma("unroll")
#else
#define GPUDIAG_LANES inline
#define GPUDIAG_UNROLL
#endif

namespace gpudiag::numerics::cuda_scan::lanes {

/// 16 bytes as four little-endian words.
struct Vec16 {
  std::uint32_t x, y, z, w;
};

/// One 16-byte load at an address that is a multiple of 16: a streaming
/// (evict-first) load on the GPU, where each byte is read once.
GPUDIAG_LANES Vec16 load_vector(std::uint64_t addr) {
#if defined(__CUDA_ARCH__)
  const uint4 v = __ldcs(reinterpret_cast<const uint4*>(addr));
  return {v.x, v.y, v.z, v.w};
#else
  Vec16 v;
  std::memcpy(&v, reinterpret_cast<const void*>(addr), sizeof v);
  return v;
#endif
}

/// __byte_perm(x, 0, s): byte i of the result is byte (nibble i of s) of x.
GPUDIAG_LANES std::uint32_t byte_perm(std::uint32_t x, std::uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, 0, s);
#else
  std::uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    const unsigned from = (s >> (4 * i)) & 7;
    r |= (from < 4 ? (x >> (8 * from)) & 0xFF : 0u) << (8 * i);
  }
  return r;
#endif
}

template <class T>
GPUDIAG_LANES T lesser(T a, T b) {
  return a < b ? a : b;
}
template <class T>
GPUDIAG_LANES T greater(T a, T b) {
  return a > b ? a : b;
}

// Two 16-bit lanes of a word at once: min.u16x2 and max.u16x2, one
// instruction each on sm_90 (__vminu2/__vmaxu2); loops on the host.
GPUDIAG_LANES std::uint32_t vmin2(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __vminu2(a, b);
#else
  return lesser(a & 0xFFFFu, b & 0xFFFFu) | (lesser(a >> 16, b >> 16) << 16);
#endif
}
GPUDIAG_LANES std::uint32_t vmax2(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __vmaxu2(a, b);
#else
  return greater(a & 0xFFFFu, b & 0xFFFFu) | (greater(a >> 16, b >> 16) << 16);
#endif
}

constexpr double kThresholds[3] = {1e2, 1e3, 1e4};
constexpr int kDTypes = 15;
/// Per thread at most kUnroll * 16 elements a tile: 2^20 tiles keep a
/// thread's 32-bit counters below 2^26 between two flushes.
constexpr std::uint64_t kMaxTilesPerFlush = std::uint64_t{1} << 20;

/// Per-dtype constants in key space (see params_for).
struct Params {
  std::uint64_t abs_mask, nan_above, inf, neg_inf, min_normal_minus_1, threshold[3];
  /// Floats: a lane whose key is below min_normal (zero, subnormal) or at or
  /// above special_from (the lowest threshold, inf, nan) is counted; any
  /// other lane only moves the min and max (the fast path, fold_vector).
  std::uint64_t special_from, min_normal;
};
struct ParamTable {
  Params p[kDTypes];
};

/// A thread's running statistics: keys of width W (32 bits unless the
/// elements are 64-bit), counters of 32 bits.
template <class W>
struct Acc {
  W lo, hi;
  std::uint32_t nan, pos_inf, neg_inf, zero, subnormal, ge0, ge1, ge2;
};

/// What a block reduces: 64-bit keys and counts.
struct Flush {
  std::uint64_t lo, hi, c[8];
};

struct MergeFlush {
  GPUDIAG_LANES Flush operator()(const Flush& a, const Flush& b) const {
    Flush m;
    m.lo = a.lo < b.lo ? a.lo : b.lo;
    m.hi = a.hi > b.hi ? a.hi : b.hi;
GPUDIAG_UNROLL
    for (int k = 0; k < 8; ++k) m.c[k] = a.c[k] + b.c[k];
    return m;
  }
};

template <class U>
using Wide = std::conditional_t<sizeof(U) == 8, std::uint64_t, std::uint32_t>;

}  // namespace gpudiag::numerics::cuda_scan::lanes
