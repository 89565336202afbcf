// The CUDA scanner against the reference scan, for every dtype, on the GPU.
// Skipped, with the reason, where this build has no CUDA or no device is
// visible.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "numerics/scan_reference.h"
#include "numerics/scanner.h"

namespace gpudiag::numerics {
namespace {

TEST(CudaScanner, MatchesTheReferenceForEveryDType) {
  std::string why_not;
  auto cuda = make_cuda_scanner(&why_not);
  if (!cuda) GTEST_SKIP() << "no CUDA scanner: " << why_not;

  std::mt19937_64 rng(42);
  std::vector<std::vector<std::uint8_t>> store;
  std::vector<TensorView> views;
  for (DType t : kAllDTypes) {
    for (std::size_t count :
         {std::size_t{0}, std::size_t{1}, std::size_t{1000}, (std::size_t{1} << 22) + 7}) {
      for (ByteOrder order : {ByteOrder::little, ByteOrder::big}) {
        std::vector<std::uint8_t> data(count * dtype_size(t));
        for (auto& b : data) b = static_cast<std::uint8_t>(rng());
        if (is_float(t) && count > 2) {
          // One tensor of each size without NaN, so min and max are compared too.
          const FloatFormat& f = float_format(t);
          const std::size_t es = dtype_size(t);
          for (std::size_t i = 0; order == ByteOrder::little && i < count; ++i) {
            std::uint64_t bits = 0;
            std::memcpy(&bits, &data[i * es], es);
            if ((bits & (f.sign_mask - 1)) > f.nan_above()) data[i * es + es - 1] &= 0xBF;
          }
        }
        store.push_back(std::move(data));
        views.push_back({t, order, store.back().data(), count});
      }
    }
  }
  const auto got = cuda->scan(views);
  const auto cpu = make_cpu_scanner(0)->scan(views);
  ASSERT_EQ(got.size(), views.size());
  for (std::size_t i = 0; i < views.size(); ++i) {
    const auto want = testing::reference_scan(views[i]);
    EXPECT_TRUE(same_stats(got[i], want))
        << dtype_name(views[i].dtype) << " tensor " << i << " (" << views[i].count << " elements)";
    EXPECT_TRUE(same_stats(cpu[i], want)) << i;
  }
}

TEST(CudaScanner, AutoFallsBackToTheCpuAndCudaSaysWhy) {
  std::string why_not;
  const bool have_cuda = make_cuda_scanner(&why_not) != nullptr;
  auto s = make_scanner(ScanDevice::automatic, 1);
  EXPECT_EQ(s->describe().rfind(have_cuda ? "cuda" : "cpu", 0), 0u) << s->describe();
  if (!have_cuda) EXPECT_FALSE(why_not.empty());
}

}  // namespace
}  // namespace gpudiag::numerics
