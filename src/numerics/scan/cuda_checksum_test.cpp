// The replica checksums of tensors on a GPU (scan_device_tensors, one launch
// per batch) against the CPU's, with the statistics of the same call against
// the CPU scanner's: every element size, tensors not 4-byte aligned, empty
// ones, one of several tiles and blocks. Skips with "no usable GPU: <why>"
// where this build has no CUDA or no device is visible.
#include <gtest/gtest.h>

#include <random>

#include "gpu/cuda.h"
#include "numerics/scan/scanner.h"

namespace gpudiag::numerics {
namespace {

TEST(CudaChecksum, ABatchOnTheGpuChecksumsAsTheCpu) {
  const CudaStatus status = probe_cuda();
  if (!status.usable)
    GTEST_SKIP() << "no usable GPU: "
                 << (status.error.empty() ? "this build has no CUDA" : status.error);
  set_device(0);
  const std::size_t bytes = (std::size_t{1} << 26) + 64;  // 64 MiB: many tiles and blocks
  std::vector<std::uint8_t> host(bytes);
  std::mt19937_64 rng(11);
  for (auto& b : host) b = static_cast<std::uint8_t>(rng());
  DeviceBuffer dev(bytes);
  copy_to_device(dev.get(), host.data(), bytes);
  struct Piece {
    DType t;
    std::size_t offset, count;
  };
  const std::vector<Piece> pieces = {
      {DType::F32, 0, (std::size_t{1} << 24) - 3},
      {DType::BF16, 2, 1001},
      {DType::U8, 1, 77},
      {DType::F64, 8, 12345},
      {DType::F16, 6, 0},
      {DType::I8, 3, 1 << 20},
  };
  std::vector<TensorView> on_gpu, on_host;
  for (const auto& p : pieces) {
    on_gpu.push_back(
        {p.t, ByteOrder::little, static_cast<const std::uint8_t*>(dev.get()) + p.offset, p.count});
    on_host.push_back({p.t, ByteOrder::little, host.data() + p.offset, p.count});
  }
  std::vector<std::uint64_t> gpu_sums(pieces.size()), cpu_sums(pieces.size());
  std::vector<TensorStats> gpu_stats(pieces.size()), cpu_stats(pieces.size());
  scan_device_tensors(on_gpu, nullptr, 0, gpu_stats.data(), gpu_sums.data());
  scan_host(on_host, 0, cpu_stats.data(), cpu_sums.data());
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(gpu_sums[i], cpu_sums[i]) << i;
    EXPECT_TRUE(same_stats(gpu_stats[i], cpu_stats[i])) << i;
  }
  // Checksums alone, again: the buffers of the first call are reused.
  std::vector<std::uint64_t> again(pieces.size());
  scan_device_tensors(on_gpu, nullptr, 0, nullptr, again.data());
  EXPECT_EQ(again, cpu_sums);
}

}  // namespace
}  // namespace gpudiag::numerics
