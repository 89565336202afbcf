// The checksum kernel's per-thread code (cuda_checksum_lanes.h) on the host:
// every thread of a block run in turn over a segment, the blocks' tile ranges
// cut at arbitrary places, the sums added as the block reduction and the
// atomics add them, and compared with the CPU's checksum, for every element
// size at every address offset within 16 bytes (heads, tails, tensors not
// 4-byte aligned) and lengths from 0 to beyond one tile.
#include "numerics/scan/cuda_checksum_lanes.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace gpudiag::numerics::cuda_scan {
namespace {

/// What the kernel computes for one segment whose tiles are cut into runs of `run`.
std::uint64_t emulate(const std::uint8_t* data, std::uint64_t count, DType t, std::uint64_t run) {
  const Segment seg{reinterpret_cast<std::uint64_t>(data), count, 0, 0,
                    static_cast<std::uint8_t>(t),          0,     {}};
  const std::uint64_t bytes = count * dtype_size(t);
  const std::uint64_t tiles = tiles_of(seg.ptr, bytes);
  std::uint64_t sum = 0;
  for (std::uint64_t t0 = 0; t0 < tiles; t0 += run)
    for (unsigned tid = 0; tid < kThreads; ++tid)
      sum += lanes::checksum_run(seg, t0, std::min(tiles, t0 + run), tid);
  return checksum_finish(sum, bytes);
}

TEST(CudaChecksumLanes, EveryAlignmentAndSizeMatchesTheCpu) {
  // Room for three tiles past a 16-byte boundary, in memory the loads may read.
  std::vector<std::uint8_t> buf(3 * kTileBytes + 64);
  std::mt19937_64 rng(7);
  for (auto& b : buf) b = static_cast<std::uint8_t>(rng());
  auto* base = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(buf.data()) + 15) &
                                               ~std::uintptr_t{15});
  for (DType t : {DType::F64, DType::F32, DType::BF16, DType::F8_E4M3}) {
    const std::uint64_t es = dtype_size(t);
    for (std::uint64_t offset = 0; offset < 16; ++offset) {
      const std::uint64_t most = (2 * kTileBytes + 40) / es;
      for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{3},
                                  std::uint64_t{17}, kTileBytes / es, most}) {
        const std::uint8_t* p = base + offset;
        const std::uint64_t want = checksum_of(p, count * es);
        for (std::uint64_t run : {1, 2, 5})
          EXPECT_EQ(emulate(p, count, t, run), want)
              << dtype_name(t) << " offset " << offset << " count " << count << " run " << run;
      }
    }
  }
}

}  // namespace
}  // namespace gpudiag::numerics::cuda_scan
