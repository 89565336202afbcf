#include "world/gpu_choice.h"

#include "util/error.h"

namespace gpudiag {

namespace {
std::string cvd(const Env& env) {
  auto v = env.get("CUDA_VISIBLE_DEVICES");
  return v ? "CUDA_VISIBLE_DEVICES=" + *v : std::string("CUDA_VISIBLE_DEVICES unset");
}
}  // namespace

GpuChoice choose_gpu(int local_rank, int visible, const Env& env, int forced) {
  if (visible <= 0)
    throw UsageError("no CUDA device visible (" + cvd(env) + ")",
                     "check that the GPUs are allocated to this job (srun --gpus-per-task, "
                     "docker --gpus) and that CUDA_VISIBLE_DEVICES is not empty");
  if (forced >= 0) {
    if (forced >= visible)
      throw UsageError("--device " + std::to_string(forced) + " but only " +
                       std::to_string(visible) + " device(s) visible (" + cvd(env) + ")");
    return {forced, "--device " + std::to_string(forced)};
  }
  if (visible == 1) return {0, "the only visible device (" + cvd(env) + ")"};
  if (local_rank >= visible)
    throw UsageError("local rank " + std::to_string(local_rank) + " has no GPU: " +
                         std::to_string(visible) + " visible (" + cvd(env) + ")",
                     "start at most " + std::to_string(visible) +
                         " ranks per node, or give each rank its own GPU");
  return {local_rank, "local rank " + std::to_string(local_rank) + " of " +
                          std::to_string(visible) + " visible devices"};
}

}  // namespace gpudiag
