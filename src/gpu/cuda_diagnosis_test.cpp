// The one-line explanations of a CUDA runtime that could not start.
#include "gpu/cuda_diagnosis.h"

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(CudaDiagnosis, DriverTooOldNamesBothVersionsAndTheFix) {
  CudaFacts f;
  f.error = 35;
  f.error_name = "cudaErrorInsufficientDriver";
  f.driver_cuda = 12040;
  f.runtime_cuda = 13000;
  f.driver_release = "550.54.15";
  const auto s = explain_cuda_failure(f);
  EXPECT_TRUE(has(s, "550.54.15 supports CUDA 12.4")) << s;
  EXPECT_TRUE(has(s, "built with CUDA 13.0")) << s;
  EXPECT_TRUE(has(s, "driver 580 or newer")) << s;
  EXPECT_TRUE(has(s, "CUDA 12.x toolkit")) << s;
  EXPECT_TRUE(has(s, "cuda-compat-13")) << s;
  EXPECT_FALSE(has(s, "CUDA_VISIBLE_DEVICES")) << s;
  EXPECT_FALSE(has(s, "\n"));
}

TEST(CudaDiagnosis, FabricManagerNotRunningOnAnNvswitchNode) {
  CudaFacts f;
  f.error = 802;
  f.error_name = "cudaErrorSystemNotReady";
  f.driver_cuda = 13000;
  f.runtime_cuda = 13000;
  f.nvswitch = true;
  const auto s = explain_cuda_failure(f);
  EXPECT_TRUE(has(s, "nvidia-fabricmanager")) << s;
  EXPECT_FALSE(has(s, "CUDA_VISIBLE_DEVICES")) << s;
  // An init error with no better code on an NVSwitch node names the fabric manager first.
  f.error = 999;
  f.error_name = "cudaErrorUnknown";
  const auto u = explain_cuda_failure(f);
  EXPECT_LT(u.find("fabricmanager"), u.find("dmesg")) << u;
}

TEST(CudaDiagnosis, NoDriverAndNoDevice) {
  CudaFacts f;
  f.error = 35;
  f.runtime_cuda = 13000;
  EXPECT_TRUE(has(explain_cuda_failure(f), "libcuda.so.1 not found"));
  f.device_nodes = true;
  EXPECT_TRUE(has(explain_cuda_failure(f), "container toolkit"));
  f = CudaFacts{};
  f.error = 100;
  f.driver_cuda = 13000;
  f.runtime_cuda = 13000;
  f.visible = "CUDA_VISIBLE_DEVICES=";
  const auto s = explain_cuda_failure(f);
  EXPECT_TRUE(has(s, "no CUDA device visible (CUDA_VISIBLE_DEVICES=)")) << s;
}

TEST(CudaDiagnosis, MinorVersionCompatibilityIsNotAnError) {
  // A CUDA 13.0 driver runs a binary built with 13.1 (minor-version
  // compatibility): the explanation must not blame the driver's age.
  CudaFacts f;
  f.error = 100;
  f.driver_cuda = 13000;
  f.runtime_cuda = 13010;
  EXPECT_FALSE(has(explain_cuda_failure(f), "which needs"));
}

}  // namespace
}  // namespace gpudiag
