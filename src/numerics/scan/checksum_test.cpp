// The replica checksum (checksum.h) on the CPU against a byte-at-a-time
// reference written from the algorithm's statement: every length and
// alignment, both builds of the loops, split across threads with and without
// the statistics in the same pass; and the property it exists for: every
// single-bit flip, a swap of two words (near, and 1.27 GiB apart) and a change
// of length change it.
#include "numerics/scan/checksum.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <random>
#include <vector>

#include "numerics/scan/scan_kernels.h"
#include "numerics/scan/scan_reference.h"
#include "numerics/scan/scanner.h"

namespace gpudiag::numerics {
namespace {

/// The algorithm as docs/formats.md states it: little-endian 32-bit words,
/// the last padded with zeros, word k times 2 * ((k + 1) * 0x9E3779B9 mod 2^32) + 1.
std::uint64_t reference(const std::uint8_t* p, std::uint64_t bytes) {
  std::uint64_t sum = 0;
  for (std::uint64_t k = 0; 4 * k < bytes; ++k) {
    std::uint64_t w = 0;
    for (std::uint64_t j = 0; j < 4 && 4 * k + j < bytes; ++j)
      w |= std::uint64_t{p[4 * k + j]} << (8 * j);
    const std::uint64_t m = 2 * ((((k + 1) & 0xFFFFFFFFu) * 0x9E3779B9u) & 0xFFFFFFFFu) + 1;
    sum += w * m;
  }
  return checksum_finish(sum, bytes);
}

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

TEST(Checksum, KnownAnswer) {
  // The test vector docs/formats.md gives other implementations.
  std::vector<std::uint8_t> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<std::uint8_t>(i);
  EXPECT_EQ(checksum_of(v.data(), 16), reference(v.data(), 16));
  EXPECT_EQ(checksum_of(v.data(), 16), 0x38a1af35fbf38734ull)
      << std::hex << checksum_of(v.data(), 16);
  EXPECT_EQ(checksum_of(nullptr, 0), checksum_finish(0, 0));
}

TEST(Checksum, EveryLengthAndAlignmentMatchesTheReference) {
  const auto data = random_bytes(4096 + 64, 1);
  for (std::size_t offset = 0; offset < 8; ++offset)
    for (std::size_t bytes :
         {0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1000, 4095, 4096}) {
      const std::uint8_t* p = data.data() + offset;
      const std::uint64_t want = reference(p, bytes);
      EXPECT_EQ(checksum_of(p, bytes), want) << offset << " " << bytes;
      EXPECT_EQ(checksum_finish(checksum_sum_baseline(p, 0, bytes), bytes), want) << bytes;
      // Split at any multiple of 4: the parts add up.
      for (std::uint64_t cut = 0; cut <= bytes; cut += 4)
        EXPECT_EQ(checksum_finish(checksum_sum(p, 0, cut) + checksum_sum(p, cut, bytes), bytes),
                  want);
    }
}

TEST(Checksum, EverySingleBitFlipAndAWordSwapAndALengthChangeIt) {
  auto data = random_bytes(96, 2);
  const std::uint64_t clean = checksum_of(data.data(), data.size());
  for (std::size_t bit = 0; bit < data.size() * 8; ++bit) {
    data[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
    EXPECT_NE(checksum_of(data.data(), data.size()), clean) << "bit " << bit;
    data[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
  }
  std::vector<std::uint8_t> zeros(64, 0);
  EXPECT_NE(checksum_of(zeros.data(), 64), checksum_of(zeros.data(), 60));
  auto swapped = data;
  std::swap_ranges(swapped.begin(), swapped.begin() + 4, swapped.begin() + 40);
  EXPECT_NE(checksum_of(swapped.data(), swapped.size()), clean);
  // A whole word changed to any other value (here every byte value of its top byte).
  for (int b = 0; b < 256; ++b) {
    if (b == data[7]) continue;
    auto changed = data;
    changed[7] = static_cast<std::uint8_t>(b);
    EXPECT_NE(checksum_of(changed.data(), changed.size()), clean) << b;
  }
}

TEST(Checksum, WordsSwappedFarApartChangeIt) {
  // Version 1's multiplier (a | 1) gave words 1 and 1 + S^-1 (S^-1 the
  // inverse of 0x9E3779B9 mod 2^32, about 1.27 GiB on) one multiplier, so
  // swapping them went unseen. A tensor that long, of zero pages but for the
  // two words, read through the loops a real tensor goes through.
  std::uint32_t inverse = kChecksumStep;  // Newton: x <- x (2 - S x), 5 rounds give 32 bits
  for (int i = 0; i < 5; ++i) inverse *= 2u - kChecksumStep * inverse;
  ASSERT_EQ(inverse * kChecksumStep, 1u);
  const std::uint64_t i = 1, j = 1 + std::uint64_t{inverse};
  EXPECT_EQ(checksum_step_of(i) | 1u, checksum_step_of(j) | 1u);  // version 1's
  EXPECT_NE(checksum_multiplier(i), checksum_multiplier(j));
  const std::uint64_t bytes = 4 * (j + 1);
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  auto* words = static_cast<std::uint32_t*>(map);
  words[i] = 0x12345678u;
  words[j] = 0x9abcdef0u;
  const std::uint64_t before = checksum_of(map, bytes);
  std::swap(words[i], words[j]);
  EXPECT_NE(checksum_of(map, bytes), before);
  ::munmap(map, bytes);
}

TEST(Checksum, ScanHostSplitsOverThreadsWithOrWithoutStatistics) {
  // 3 M + 5 floats: several 1 M-element ranges, a partial one; an odd bf16 count;
  // a one-byte tensor at an odd address; an empty one.
  const auto big = random_bytes((3 * (1u << 20) + 5) * 4, 3);
  const auto odd = random_bytes(2 * 1001 + 1, 4);
  std::vector<TensorView> views = {
      {DType::F32, ByteOrder::little, big.data(), 3 * (1u << 20) + 5},
      {DType::BF16, ByteOrder::little, odd.data() + 1, 1001},
      {DType::U8, ByteOrder::little, odd.data() + 3, 77},
      {DType::F64, ByteOrder::little, big.data(), 0},
  };
  std::vector<std::uint64_t> alone(views.size()), with_stats(views.size());
  std::vector<TensorStats> stats(views.size());
  scan_host(views, 4, nullptr, alone.data());
  scan_host(views, 3, stats.data(), with_stats.data());
  for (std::size_t i = 0; i < views.size(); ++i) {
    const std::uint64_t bytes = views[i].count * dtype_size(views[i].dtype);
    EXPECT_EQ(alone[i], reference(views[i].data, bytes)) << i;
    EXPECT_EQ(with_stats[i], alone[i]) << i;
    EXPECT_TRUE(same_stats(stats[i], testing::reference_scan(views[i]))) << i;
  }
  // The statistics of the same pass are the scanner's.
  const auto scanned = make_cpu_scanner(2)->scan(views);
  for (std::size_t i = 0; i < views.size(); ++i) EXPECT_TRUE(same_stats(stats[i], scanned[i])) << i;
}

}  // namespace
}  // namespace gpudiag::numerics
