// The CUDA scanner's kernel seen from plain C++: the segment table it reads,
// the per-tensor accumulator it writes, and its launcher (cuda_scan_kernel.cu).
// No CUDA header here, so the host pipeline (cuda_scanner.cpp) and the planner
// (scan_plan.h) share these types with a plain C++ compiler.
//
// One launch scans any number of segments (a tensor, or a piece of one) of any
// dtypes: segment i covers tiles [first_tile, next segment's first_tile), a
// tile being kTileBytes of the segment counted from its address rounded down
// to 16 bytes. Each block takes a contiguous range of tiles over the
// concatenation and folds every segment it touches into results[tensor] with
// 64-bit atomics, so a tensor's statistics stay on the device until the host
// copies the whole results array back once.
#pragma once

#include <cstdint>
#include <string>

#include "numerics/scan/dtype.h"
#include "numerics/scan/tensor_stats.h"

namespace gpudiag::numerics::cuda_scan {

inline constexpr int kThreads = 256;
inline constexpr int kVectorBytes = 16;  ///< one 16-byte load (uint4) per thread per step
inline constexpr int kUnroll = 4;        ///< loads in flight per thread per tile
inline constexpr std::uint64_t kTileBytes = std::uint64_t{kThreads} * kVectorBytes * kUnroll;

/// One entry of the kernel's table; the table ends with a sentinel whose
/// first_tile is the total tile count.
struct Segment {
  std::uint64_t ptr;         ///< device address of the first element
  std::uint64_t count;       ///< elements
  std::uint64_t first_tile;  ///< tiles of all earlier segments
  std::uint32_t tensor;      ///< index into the results array
  std::uint8_t dtype;        ///< DType
  std::uint8_t swap;         ///< 1: elements are big-endian
  std::uint8_t pad[2];
};
static_assert(sizeof(Segment) == 32);

/// Statistics of one tensor as the kernel accumulates them: order keys (see
/// cuda_scan_kernel.cu) with the minimum stored inverted, so an all-zero
/// array is the identity and every field merges with atomicMax/atomicAdd.
struct Accumulator {
  std::uint64_t inv_lo, hi;
  std::uint64_t nan, pos_inf, neg_inf, zero, subnormal, ge[3];
};
static_assert(sizeof(Accumulator) == 80);

/// Tiles a segment of `bytes` bytes at device address `addr` spans.
inline std::uint64_t tiles_of(std::uint64_t addr, std::uint64_t bytes) {
  if (bytes == 0) return 0;
  return ((addr % kVectorBytes) + bytes + kTileBytes - 1) / kTileBytes;
}

/// The TensorStats of `count` elements of `t` from their accumulator (the
/// CPU scanner's dtype tables decode the keys, so both agree bit for bit).
TensorStats decode(const Accumulator& a, DType t, std::uint64_t count);

/// Blocks per SM the kernel reaches at kThreads threads (occupancy API), and
/// whether this GPU has code for it; fills `error` from cudaGetErrorString on failure.
int blocks_per_sm(std::string* error);

/// Queues on `stream` (a cudaStream_t) the kernel over the `n_segments`
/// entries at `segments` (device memory, sentinel included), `total_tiles`
/// tiles, into `results` (device). Returns the CUDA error code of the launch (0: ok).
int launch(const Segment* segments, std::uint32_t n_segments, std::uint64_t total_tiles,
           Accumulator* results, int grid, void* stream);

/// The replica checksum kernel (cuda_checksum_kernel.cu) over the same table:
/// adds each segment's checksum sum (checksum.h) into sums[tensor] (device
/// memory, zeroed by the caller). Returns the launch's CUDA error code.
int launch_checksum(const Segment* segments, std::uint32_t n_segments, std::uint64_t total_tiles,
                    std::uint64_t* sums, int grid, void* stream);

/// As blocks_per_sm, for the checksum kernel.
int checksum_blocks_per_sm(std::string* error);

}  // namespace gpudiag::numerics::cuda_scan
