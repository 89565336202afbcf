// The CUDA scanner against the reference scan, for every dtype, on the GPU,
// and on the device the user chose. Skipped, with the reason, where this
// build has no CUDA or no device is visible. The choice of device itself
// (scan_gpu.h) is tested everywhere.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "gpu/cuda.h"
#include "numerics/scan_gpu.h"
#include "numerics/scan_reference.h"
#include "numerics/scanner.h"
#include "util/error.h"

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

TEST(CudaScanner, SplitsTensorsLargerThanAChunkAndStillMatches) {
  std::string why_not;
  auto cuda = make_cuda_scanner(&why_not);
  if (!cuda) GTEST_SKIP() << "no CUDA scanner: " << why_not;
  // Pieces of several tensors in a row cycle through both staging buffers;
  // the large floats hold no NaN, so min and max are merged across pieces.
  std::mt19937_64 rng(7);
  const struct {
    DType dtype;
    std::size_t count;
  } shapes[] = {{DType::F32, 1000}, {DType::BF16, (std::size_t{64} << 20) + 3}, {DType::I8, 5},
                {DType::F64, 0},    {DType::F64, (std::size_t{8} << 20) + 5},   {DType::F16, 17}};
  std::vector<std::vector<std::uint8_t>> store;
  std::vector<TensorView> views;
  for (const auto& s : shapes) {
    const std::size_t es = dtype_size(s.dtype);
    std::vector<std::uint8_t> data(s.count * es);
    for (auto& b : data) b = static_cast<std::uint8_t>(rng());
    for (std::size_t i = 0; is_float(s.dtype) && s.count > 1000 && i < s.count; ++i) {
      const FloatFormat& f = float_format(s.dtype);
      std::uint64_t bits = 0;
      std::memcpy(&bits, &data[i * es], es);
      if ((bits & (f.sign_mask - 1)) > f.nan_above()) data[i * es + es - 1] &= 0xBF;
    }
    store.push_back(std::move(data));
    views.push_back({s.dtype, ByteOrder::little, store.back().data(), s.count});
  }
  const auto got = cuda->scan(views);
  ASSERT_EQ(got.size(), views.size());
  for (std::size_t i = 0; i < views.size(); ++i)
    EXPECT_TRUE(same_stats(got[i], testing::reference_scan(views[i])))
        << dtype_name(views[i].dtype) << " tensor " << i << " (" << views[i].count << " elements)";
}

TEST(CudaScanner, RunsOnTheRequestedGpuAndRefusesOneNotVisible) {
  const CudaStatus cuda = probe_cuda();
  if (!cuda.usable)
    GTEST_SKIP() << "no CUDA device: "
                 << (cuda.error.empty() ? "this build has no CUDA" : cuda.error);
  const int last = cuda.device_count - 1;
  std::string why_not;
  auto s = make_cuda_scanner(&why_not, last);
  ASSERT_TRUE(s) << why_not;
  EXPECT_NE(s->describe().find("device " + std::to_string(last) + ")"), std::string::npos)
      << s->describe();
  try {
    make_cuda_scanner(&why_not, cuda.device_count);
    FAIL() << "--gpu " << cuda.device_count << " was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(cuda.device_count) + " CUDA device(s)"),
              std::string::npos)
        << e.what();
  }
}

Env env_of(std::map<std::string, std::string> vars) { return Env(vars); }

TEST(ScanGpuChoice, TheRequestedOrdinalWins) {
  const auto g = choose_scan_gpu(2, 4, env_of({{"LOCAL_RANK", "1"}}));
  EXPECT_EQ(g.ordinal, 2);
  EXPECT_EQ(g.why, "--gpu 2");
}

TEST(ScanGpuChoice, AnOrdinalNotVisibleNamesTheCountAndCudaVisibleDevices) {
  try {
    choose_scan_gpu(2, 2, env_of({{"CUDA_VISIBLE_DEVICES", "4,5"}}));
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(e.one_line(),
              "--gpu 2: only 2 CUDA device(s) visible (CUDA_VISIBLE_DEVICES=4,5); try: give "
              "--gpu 0 to 1 (ordinals count the visible devices only)");
  }
  try {
    choose_scan_gpu(0, 0, env_of({}));
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA_VISIBLE_DEVICES unset"), std::string::npos);
  }
}

TEST(ScanGpuChoice, TheLocalRankModuloTheVisibleDevices) {
  EXPECT_EQ(choose_scan_gpu(-1, 4, env_of({{"LOCAL_RANK", "6"}})).ordinal, 2);
  EXPECT_EQ(choose_scan_gpu(-1, 4, env_of({{"LOCAL_RANK", "6"}})).why,
            "LOCAL_RANK=6 modulo 4 visible device(s)");
  EXPECT_EQ(choose_scan_gpu(-1, 1, env_of({{"LOCAL_RANK", "3"}})).ordinal, 0);
  EXPECT_EQ(choose_scan_gpu(-1, 8, env_of({{"SLURM_LOCALID", "3"}})).ordinal, 3);
  EXPECT_EQ(choose_scan_gpu(-1, 2, env_of({{"OMPI_COMM_WORLD_LOCAL_RANK", "3"}})).ordinal, 1);
  // LOCAL_RANK first; a value that is not a rank is skipped.
  EXPECT_EQ(choose_scan_gpu(-1, 8, env_of({{"LOCAL_RANK", "1"}, {"SLURM_LOCALID", "5"}})).ordinal,
            1);
  EXPECT_EQ(choose_scan_gpu(-1, 8, env_of({{"LOCAL_RANK", "x"}, {"SLURM_LOCALID", "5"}})).ordinal,
            5);
  EXPECT_EQ(choose_scan_gpu(-1, 8, env_of({{"LOCAL_RANK", "-1"}})).ordinal, 0);
}

TEST(ScanGpuChoice, DeviceZeroWithoutALocalRank) {
  EXPECT_EQ(choose_scan_gpu(-1, 4, env_of({{"CUDA_VISIBLE_DEVICES", "2,3"}})).ordinal, 0);
}

}  // namespace
}  // namespace gpudiag::numerics
