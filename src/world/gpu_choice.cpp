#include "world/gpu_choice.h"

#include <optional>

#include "util/error.h"

namespace gpudiag {

namespace {
std::string cvd(const Env& env) {
  auto v = env.get("CUDA_VISIBLE_DEVICES");
  return v ? "CUDA_VISIBLE_DEVICES=" + *v : std::string("CUDA_VISIBLE_DEVICES unset");
}
/// "SLURM_GPUS_PER_TASK=2" when SLURM bound GPUs to each task.
std::optional<std::string> gpus_per_task(const Env& env) {
  if (auto v = env.get("SLURM_GPUS_PER_TASK"); v && !v->empty())
    return "SLURM_GPUS_PER_TASK=" + *v;
  if (auto v = env.get("SLURM_TRES_PER_TASK"); v && v->find("gpu") != std::string::npos)
    return "SLURM_TRES_PER_TASK=" + *v;
  return std::nullopt;
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
  // SLURM's --gpus-per-task binds each task to GPUs of its own: the view is
  // the task's, so its local rank does not index it. The first is ours.
  if (auto per_task = gpus_per_task(env))
    return {0, "the first of the " + std::to_string(visible) + " GPUs bound to this task (" +
                   *per_task + ", " + cvd(env) + "); gpudiag tests one GPU per rank"};
  if (local_rank >= visible)
    throw UsageError("local rank " + std::to_string(local_rank) + " has no GPU: " +
                         std::to_string(visible) + " visible (" + cvd(env) + ")",
                     "start at most " + std::to_string(visible) +
                         " ranks per node, give each rank its own GPU (srun --gpus-per-task=1, "
                         "or CUDA_VISIBLE_DEVICES per rank), or pass --device N");
  return {local_rank, "local rank " + std::to_string(local_rank) + " of " +
                          std::to_string(visible) + " visible devices"};
}

}  // namespace gpudiag
