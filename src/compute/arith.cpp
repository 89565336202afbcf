// The CPU's run of compute/math.h: the inputs widened to fp32 once, the GEMM
// with std::fma in k order (B transposed first, which changes no arithmetic),
// and the checksum's reduction thread by thread and block by block, so each
// addition happens in the order the GPU's kernel does it.
#include "compute/arith.h"

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>

// The host's checksums are the same on every CPU and build (checked with GCC
// and Clang at -O0 to -O3 -march=native -ffp-contract=fast): the products are
// std::fma, correctly rounded everywhere, and the sums are plain fp32 adds in
// a fixed order, which no standard optimisation reorders. Only options that
// give up IEEE arithmetic change them (-ffast-math changes the fp32 GEMM's),
// and so does x87's extended precision: such a build is refused here, so the
// known checksum of data/compute-checksums.json holds for any CPU.
#ifdef __FAST_MATH__
#error "the compute check's CPU arithmetic needs IEEE fp32: build without -ffast-math"
#endif
static_assert(FLT_EVAL_METHOD == 0, "the compute check's CPU arithmetic needs fp32 evaluated as fp32");

namespace gpudiag::compute {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
    case Precision::fp32: return "fp32";
  }
  return "?";
}

std::vector<float> cpu_gemm(Precision p, int n) {
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  std::vector<float> a(nn), bt(nn), c(nn);
  for (std::size_t i = 0; i < nn; ++i) a[i] = std::bit_cast<float>(input_as_fp32(p, 0, i));
  for (std::size_t k = 0; k < static_cast<std::size_t>(n); ++k)
    for (std::size_t j = 0; j < static_cast<std::size_t>(n); ++j)
      bt[j * n + k] = std::bit_cast<float>(input_as_fp32(p, 1, k * n + j));
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i)
    for (std::size_t j = 0; j < static_cast<std::size_t>(n); ++j) {
      const float* row = &a[i * n];
      const float* col = &bt[j * n];
      float acc = 0.0f;
      for (int k = 0; k < n; ++k) acc = std::fma(row[k], col[k], acc);
      c[i * n + j] = acc;
    }
  return c;
}

std::uint64_t checksum(const float* c, std::size_t count) {
  constexpr std::size_t kStride = static_cast<std::size_t>(kReduceBlocks) * kReduceThreads;
  std::vector<std::uint64_t> hashes(kReduceBlocks);
  std::vector<float> sums(kReduceBlocks);
  std::vector<float> v(kReduceThreads);
  for (int b = 0; b < kReduceBlocks; ++b) {
    std::uint64_t h = 0;
    for (int t = 0; t < kReduceThreads; ++t) {
      float f = 0.0f;
      for (std::size_t i = static_cast<std::size_t>(b) * kReduceThreads + t; i < count; i += kStride) {
        f = f + c[i];
        h += element_hash(i, std::bit_cast<std::uint32_t>(c[i]));
      }
      v[t] = f;
    }
    for (int s = kReduceThreads / 2; s > 0; s /= 2)
      for (int t = 0; t < s; ++t) v[t] = v[t] + v[t + s];
    hashes[b] = h;
    sums[b] = v[0];
  }
  return finish_checksum(hashes.data(), sums.data());
}

std::uint64_t finish_checksum(const std::uint64_t* hashes, const float* sums) {
  std::uint64_t h = 0;
  float f = 0.0f;
  for (int b = 0; b < kReduceBlocks; ++b) {
    h += hashes[b];
    f = f + sums[b];
  }
  return combine(h, std::bit_cast<std::uint32_t>(f));
}

std::string hex64(std::uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

void flip_bit(float* c, int n) {
  float& x = c[flip_index(static_cast<std::uint64_t>(n))];
  x = std::bit_cast<float>(std::bit_cast<std::uint32_t>(x) ^ kFlipBit);
}

}  // namespace gpudiag::compute
