// Which GPU a rank uses: its local rank among the devices it can see.
//
// CUDA_VISIBLE_DEVICES is applied by the CUDA runtime itself, so "visible"
// already means after it. Exactly one visible device means device 0 (SLURM's
// --gpus-per-task=1 and docker's --gpus device=N give each rank its own view).
// Under SLURM's --gpus-per-task (SLURM_GPUS_PER_TASK, or gpu in
// SLURM_TRES_PER_TASK) each task sees the GPUs bound to it alone, so it takes
// the first of its own, whatever its local rank. --device N overrides the choice.
#pragma once

#include <string>

#include "util/env.h"

namespace gpudiag {

struct GpuChoice {
  int ordinal = -1;    ///< CUDA device ordinal
  std::string why;     ///< e.g. "local rank 1 of 2 visible devices"
};

/// Throws UsageError naming CUDA_VISIBLE_DEVICES when local_rank has no device.
/// `forced` >= 0 picks that ordinal (still checked against `visible`).
GpuChoice choose_gpu(int local_rank, int visible, const Env& env, int forced = -1);

}  // namespace gpudiag
