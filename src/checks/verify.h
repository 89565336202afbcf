// The arithmetic of the all-reduce check: what each rank contributes, what the
// sum must be, and how to explain a wrong sum.
//
// Rank r contributes c(r, i) = (31 r + i) mod 97 at element i. The values are
// small integers, so float sums are exact for any world below 170,000 ranks and
// a correct result must match bit for bit. They vary along the buffer, so a
// chunk landing at the wrong offset is caught, and along ranks, so a missing
// or doubled contribution can be traced to the rank it came from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpudiag {

inline constexpr int kPatternPeriod = 97;

constexpr float contribution(int rank, std::size_t i) {
  return static_cast<float>((31ull * static_cast<unsigned>(rank) + i) % kPatternPeriod);
}

/// Writes c(rank, i) for i in [0, n).
void fill_contribution(float* out, std::size_t n, int rank);

/// The expected sum over `world_size` ranks, which depends only on i mod 97.
class ExpectedSum {
 public:
  explicit ExpectedSum(int world_size);
  float at(std::size_t i) const { return table_[i % kPatternPeriod]; }
  int world_size() const { return world_size_; }

 private:
  int world_size_;
  std::vector<float> table_;
};

struct Mismatch {
  std::size_t count = 0;        ///< elements that differ
  std::size_t first_index = 0;
  float got = 0, expected = 0;
  std::string explanation;      ///< e.g. "rank 3's contribution is missing", or empty
};

/// nullopt when every element equals the expected sum exactly.
std::optional<Mismatch> verify_sum(const float* data, std::size_t n, const ExpectedSum& expected);

/// Bus bandwidth of an all-reduce, in GB/s (1e9 bytes/s), as nccl-tests
/// defines it: algbw = bytes / seconds, busbw = algbw * 2 (n - 1) / n.
double allreduce_busbw_gbps(double bytes, double seconds, int world_size);

}  // namespace gpudiag
