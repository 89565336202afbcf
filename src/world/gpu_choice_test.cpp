#include "world/gpu_choice.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace gpudiag {
namespace {

TEST(GpuChoice, LocalRankAmongVisible) {
  EXPECT_EQ(choose_gpu(3, 8, Env()).ordinal, 3);
}

TEST(GpuChoice, OneVisibleDeviceIsDeviceZero) {
  EXPECT_EQ(choose_gpu(5, 1, Env(std::map<std::string, std::string>{{"CUDA_VISIBLE_DEVICES", "5"}})).ordinal, 0);
}

TEST(GpuChoice, TooFewDevicesNamesCudaVisibleDevices) {
  try {
    choose_gpu(2, 2, Env(std::map<std::string, std::string>{{"CUDA_VISIBLE_DEVICES", "0,1"}}));
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA_VISIBLE_DEVICES=0,1"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("local rank 2"), std::string::npos);
  }
  EXPECT_THROW(choose_gpu(0, 0, Env()), UsageError);
}

TEST(GpuChoice, ForcedDevice) {
  EXPECT_EQ(choose_gpu(0, 4, Env(), 2).ordinal, 2);
  EXPECT_THROW(choose_gpu(0, 4, Env(), 4), UsageError);
}

}  // namespace
}  // namespace gpudiag
