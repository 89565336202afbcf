// The compute check's kernels on a GPU (skipped, with the reason, without
// one): the fp32 GEMM and the reduction are the CPU's arithmetic bit for bit,
// every precision's checksum is the same on every run, the test hook's flip
// moves it, and the whole phase on the GPU agrees with itself.
#include <gtest/gtest.h>

#include "compute/arith.h"
#include "compute/run.h"
#include "gpu/compute_gemm.h"
#include "gpu/cuda.h"

namespace gpudiag::compute {
namespace {

bool have_gpu(std::string& why) {
  const auto s = probe_cuda();
  why = s.usable ? "" : "no usable GPU here: " + s.error;
  if (s.usable) set_device(0);
  return s.usable;
}

std::uint64_t on_gpu(GpuGemm& g, bool flip = false) {
  std::uint64_t sum = 0;
  EXPECT_GT(g.run(sum, flip, Deadline::after_seconds(60)), 0);
  return sum;
}

TEST(ComputeGpu, TheFp32GemmIsTheCpusBitForBit) {
  std::string why;
  if (!have_gpu(why)) GTEST_SKIP() << why;
  for (int n : {16, 64, 256}) {
    auto gemm = make_gpu_gemm(Precision::fp32, n);
    const auto c = cpu_gemm(Precision::fp32, n);
    EXPECT_EQ(hex64(on_gpu(*gemm)), hex64(checksum(c.data(), c.size()))) << n;
  }
}

TEST(ComputeGpu, EveryChecksumIsTheSameOnEveryRunAndTheFlipMovesIt) {
  std::string why;
  if (!have_gpu(why)) GTEST_SKIP() << why;
  for (Precision p : {Precision::bf16, Precision::fp16, Precision::fp32}) {
    auto gemm = make_gpu_gemm(p, 1024);
    const auto first = on_gpu(*gemm);
    for (int run = 1; run < 10; ++run) ASSERT_EQ(on_gpu(*gemm), first) << precision_name(p) << " run " << run;
    EXPECT_NE(on_gpu(*gemm, true), first) << precision_name(p);
    EXPECT_EQ(on_gpu(*gemm), first) << precision_name(p);
  }
}

TEST(ComputeGpu, ThePhaseOnTheGpu) {
  std::string why;
  if (!have_gpu(why)) GTEST_SKIP() << why;
  ComputeOptions o;
  o.gpu = true;
  o.seconds = 0.3;
  o.model = gpu_info(0).name;
  const auto r = run_compute(o);
  EXPECT_EQ(r.judged, "");
  ASSERT_EQ(r.parts.size(), 3u);
  EXPECT_GT(r.tflops, 1);
  for (const auto& part : r.parts) EXPECT_GE(part.repeats, 2) << part.name;
}

}  // namespace
}  // namespace gpudiag::compute
