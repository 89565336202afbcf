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

TEST(GpuChoice, GpusBoundPerTaskAreTheTasksOwnView) {
  // srun --gpus-per-task=2: task 3 (local rank 3) sees its own two GPUs.
  using Vars = std::map<std::string, std::string>;
  auto c = choose_gpu(3, 2, Env(Vars{{"SLURM_GPUS_PER_TASK", "2"}, {"CUDA_VISIBLE_DEVICES", "0,1"}}));
  EXPECT_EQ(c.ordinal, 0);
  EXPECT_NE(c.why.find("bound to this task"), std::string::npos) << c.why;
  EXPECT_EQ(choose_gpu(1, 2, Env(Vars{{"SLURM_TRES_PER_TASK", "cpu=4,gres/gpu=2"}})).ordinal, 0);
  // Without that binding the error says what to set.
  try {
    choose_gpu(3, 2, Env(Vars{{"CUDA_VISIBLE_DEVICES", "0,1"}}));
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(e.one_line().find("--gpus-per-task=1"), std::string::npos) << e.one_line();
    EXPECT_NE(e.one_line().find("--device N"), std::string::npos) << e.one_line();
  }
}

TEST(GpuChoice, ForcedDevice) {
  EXPECT_EQ(choose_gpu(0, 4, Env(), 2).ordinal, 2);
  EXPECT_THROW(choose_gpu(0, 4, Env(), 4), UsageError);
}

}  // namespace
}  // namespace gpudiag
