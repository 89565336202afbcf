// The CUDA scan kernel's per-thread code (cuda_scan_lanes.h) on the host:
// every thread of a block run in turn over a segment, merged as the block
// reduction and the atomics merge them, decoded as the scanner decodes them,
// and compared with the CPU scanner, for every dtype on special values (nan,
// +-inf, subnormals, +-max, the 1e2/1e3/1e4 thresholds, -0) at every
// alignment, both byte orders, and flushes every tile, every 3 tiles or once.
#include "numerics/scan/cuda_scan_lanes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "numerics/scan/scan_kernels.h"

namespace gpudiag::numerics::cuda_scan {
namespace {

/// What one block computes for a segment, flushing every `run` tiles.
TensorStats emulate(const TensorView& v, std::uint64_t run) {
  const Segment seg{reinterpret_cast<std::uint64_t>(v.data), v.count, 0, 0,
                    static_cast<std::uint8_t>(v.dtype),
                    static_cast<std::uint8_t>(v.order == ByteOrder::big && dtype_size(v.dtype) > 1),
                    {}};
  const std::uint64_t tiles = tiles_of(seg.ptr, v.count * dtype_size(v.dtype));
  const lanes::Params p = lanes::params_for(v.dtype);
  Accumulator acc{};
  for (std::uint64_t t = 0; t < tiles; t += run) {
    lanes::Flush r{~std::uint64_t{0}, 0, {}};
    for (unsigned tid = 0; tid < kThreads; ++tid)
      r = lanes::MergeFlush()(r, lanes::scan_dtype(seg, t, std::min(tiles, t + run), p, tid));
    acc.inv_lo = std::max(acc.inv_lo, ~r.lo);
    acc.hi = std::max(acc.hi, r.hi);
    std::uint64_t* counts = &acc.nan;
    for (int k = 0; k < 8; ++k) counts[k] += r.c[k];
  }
  return v.count ? decode(acc, v.dtype, v.count) : TensorStats{};
}

void put(std::vector<std::uint8_t>& out, DType t, std::uint64_t bits) {
  for (std::size_t b = 0; b < dtype_size(t); ++b)
    out.push_back(static_cast<std::uint8_t>(bits >> (8 * b)));
}

/// Special patterns of `t`, then `tail` random ones; NaN patterns left out
/// when `nan_free`, so min and max are compared too.
std::vector<std::uint8_t> values(DType t, std::size_t tail, bool nan_free, std::mt19937_64& rng) {
  const std::uint64_t all =
      dtype_size(t) == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * dtype_size(t))) - 1;
  std::vector<std::uint64_t> v = {0,   1,   all, all >> 1, (all >> 1) + 1, 2,     99,
                                  100, 101, 999, 1000,     9999,           10000, 10001};
  if (is_float(t)) {
    const FloatFormat& f = float_format(t);
    for (std::uint64_t sign : {std::uint64_t{0}, f.sign_mask})
      for (std::uint64_t b : {std::uint64_t{0}, std::uint64_t{1}, f.min_normal - 1, f.min_normal,
                              f.max_finite, f.max_finite - 1, f.inf, f.nan_above() + 1,
                              f.sign_mask - 1, float_threshold_bits(t, 1e2),
                              float_threshold_bits(t, 1e2) - 1, float_threshold_bits(t, 1e3),
                              float_threshold_bits(t, 1e4)})
        v.push_back((b & (f.sign_mask - 1)) | sign);
  }
  for (std::size_t i = 0; i < tail; ++i) v.push_back(rng());
  std::vector<std::uint8_t> out;
  for (std::uint64_t x : v) {
    x &= all;
    if (nan_free && is_float(t)) {
      const FloatFormat& f = float_format(t);
      if ((x & (f.sign_mask - 1)) > f.nan_above()) x &= ~(f.sign_mask >> 1);  // clear the top exponent bit
    }
    put(out, t, x);
  }
  return out;
}

TEST(CudaScanLanes, EveryThreadOfABlockMatchesTheCpuScannerForEveryDType) {
  std::mt19937_64 rng(3);
  std::vector<std::uint8_t> buf(std::size_t{1} << 20);
  for (DType t : kAllDTypes)
    for (std::size_t tail : {std::size_t{0}, std::size_t{7}, std::size_t{50000}})
      for (bool nan_free : {false, true}) {
        const auto bytes = values(t, tail, nan_free, rng);
        for (std::size_t shift : {0, 1, 2, 4, 8, 15})  // the buffer is 16-byte aligned
          for (ByteOrder order : {ByteOrder::little, ByteOrder::big})
            for (std::uint64_t run : {std::uint64_t{1}, std::uint64_t{3}, std::uint64_t{1} << 20}) {
              auto* base = reinterpret_cast<std::uint8_t*>(
                  (reinterpret_cast<std::uintptr_t>(buf.data()) + 15) & ~std::uintptr_t{15});
              std::copy(bytes.begin(), bytes.end(), base + shift);
              const TensorView v{t, order, base + shift, bytes.size() / dtype_size(t)};
              EXPECT_TRUE(same_stats(emulate(v, run), scan_range(v, 0, v.count)))
                  << dtype_name(t) << ": " << v.count << " elements at offset " << shift
                  << (order == ByteOrder::big ? ", big-endian" : "") << ", a flush every " << run
                  << " tiles" << (nan_free ? ", no NaN" : "");
            }
      }
}

/// Ordinary values, as trained weights hold: normal, nonzero, |x| below the
/// lowest threshold, so whole vectors take the fast path (min and max only),
/// with a few special values planted after `plain` ordinary ones.
std::vector<std::uint8_t> ordinary(DType t, std::size_t n, std::size_t plain, std::mt19937_64& rng) {
  const FloatFormat& f = float_format(t);
  const std::uint64_t lo = f.min_normal, hi = float_threshold_bits(t, 1e2) - 1;
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t x = lo + rng() % (hi - lo + 1);
    if (rng() & 1) x |= f.sign_mask;
    if (i >= plain && i % 997 == 0) x = i % 2 ? f.min_normal - 1 : float_threshold_bits(t, 1e3);
    put(out, t, x);
  }
  return out;
}

TEST(CudaScanLanes, VectorsOfOrdinaryFloatsTakeTheFastPathAndKeepMinAndMax) {
  std::mt19937_64 rng(5);
  std::vector<std::uint8_t> buf(std::size_t{1} << 22);
  auto* base = reinterpret_cast<std::uint8_t*>(
      (reinterpret_cast<std::uintptr_t>(buf.data()) + 15) & ~std::uintptr_t{15});
  for (DType t : kAllDTypes) {
    if (!is_float(t)) continue;
    for (std::size_t plain : {std::size_t{1} << 30, std::size_t{20000}})  // none special, some
      for (ByteOrder order : {ByteOrder::little, ByteOrder::big}) {
        const auto bytes = ordinary(t, 40000, plain, rng);
        std::copy(bytes.begin(), bytes.end(), base);
        const TensorView v{t, order, base, bytes.size() / dtype_size(t)};
        // The reference reads little-endian values; big-endian input is the
        // same bytes read the other way, so compare each order with itself.
        EXPECT_TRUE(same_stats(emulate(v, 1u << 20), scan_range(v, 0, v.count)))
            << dtype_name(t) << (order == ByteOrder::big ? ", big-endian" : "")
            << (plain > 40000 ? ", none special" : ", some special");
      }
  }
}

TEST(CudaScanLanes, PackedLaneOpsMatchTheirDefinition) {
  EXPECT_EQ(lanes::vmin2(0x00051000u, 0x00030FFFu), 0x00030FFFu);
  EXPECT_EQ(lanes::vmax2(0x00051000u, 0x00030FFFu), 0x00051000u);
  EXPECT_EQ(lanes::vmin2(0xFFFF0001u, 0x0000FFFFu), 0x00000001u);
}

TEST(CudaScanLanes, BytePermMatchesTheHardwareDefinition) {
  EXPECT_EQ(lanes::byte_perm(0x44332211u, 0x3210), 0x44332211u);
  EXPECT_EQ(lanes::byte_perm(0x44332211u, 0x0123), 0x11223344u);
  EXPECT_EQ(lanes::byte_perm(0x44332211u, 0x2301), 0x33441122u);
}

}  // namespace
}  // namespace gpudiag::numerics::cuda_scan
