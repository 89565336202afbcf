#include "checks/verify.h"

#include <cmath>

namespace gpudiag {

void fill_contribution(float* out, std::size_t n, int rank) {
  for (std::size_t i = 0; i < n; ++i) out[i] = contribution(rank, i);
}

ExpectedSum::ExpectedSum(int world_size) : world_size_(world_size), table_(kPatternPeriod) {
  for (int k = 0; k < kPatternPeriod; ++k) {
    std::uint64_t s = 0;
    for (int r = 0; r < world_size; ++r) s += static_cast<std::uint64_t>(contribution(r, k));
    table_[k] = static_cast<float>(s);
  }
}

namespace {

/// Finds one rank whose contribution, missing (sign -1) or doubled (+1),
/// explains the differences at the first mismatching elements.
std::string explain(const float* data, std::size_t n, const ExpectedSum& e) {
  std::vector<std::size_t> idx;
  for (std::size_t i = 0; i < n && idx.size() < 32; ++i)
    if (data[i] != e.at(i)) idx.push_back(i);
  if (e.world_size() > 4096) return {};
  for (int sign : {-1, +1}) {
    for (int r = 0; r < e.world_size(); ++r) {
      bool all = true;
      for (auto i : idx)
        if (data[i] - e.at(i) != sign * contribution(r, i)) {
          all = false;
          break;
        }
      if (all)
        return "rank " + std::to_string(r) + "'s contribution is " +
               (sign < 0 ? "missing" : "counted twice");
    }
  }
  return {};
}

}  // namespace

std::optional<Mismatch> verify_sum(const float* data, std::size_t n, const ExpectedSum& expected) {
  std::optional<Mismatch> m;
  for (std::size_t i = 0; i < n; ++i) {
    float want = expected.at(i);
    // Compare bits: a NaN must not pass, and -0 cannot occur.
    if (data[i] == want) continue;
    if (!m) m = Mismatch{0, i, data[i], want, {}};
    ++m->count;
  }
  if (m) m->explanation = explain(data, n, expected);
  return m;
}

double allreduce_busbw_gbps(double bytes, double seconds, int world_size) {
  if (seconds <= 0 || world_size < 1) return 0;
  double algbw = bytes / seconds / 1e9;
  return algbw * (2.0 * (world_size - 1) / world_size);
}

}  // namespace gpudiag
