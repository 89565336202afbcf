// Which CUDA device `gpudiag scan` uses. A pure function of the user's
// --gpu, the number of visible devices and the environment, so the unit tests
// reach it without a GPU. Header-only because it is this small.
//
// --gpu N wins (checked against the count). Without it, a scan started by a
// launcher (one scan per local rank, e.g. `srun --ntasks-per-node 8 gpudiag
// scan ...`) takes its local rank modulo the visible devices, so the scans
// spread over the GPUs instead of piling onto device 0; by hand it is 0.
// "Visible" is after CUDA_VISIBLE_DEVICES, which the CUDA runtime applies.
#pragma once

#include <charconv>
#include <string>

#include "util/env.h"
#include "util/error.h"

namespace gpudiag::numerics {

struct ScanGpu {
  int ordinal = 0;
  std::string why;  ///< for the log: "--gpu 1", "LOCAL_RANK=5 modulo 4 visible devices"
};

/// The variables a launcher sets to a process's local rank, first set wins.
inline constexpr const char* kLocalRankVars[] = {"LOCAL_RANK", "SLURM_LOCALID",
                                                 "OMPI_COMM_WORLD_LOCAL_RANK"};

/// `requested` >= 0: that ordinal (--gpu); -1: the local rank modulo
/// `visible`, else 0. Throws UsageError when `requested` is not below
/// `visible` (or nothing is visible), naming the count and CUDA_VISIBLE_DEVICES.
inline ScanGpu choose_scan_gpu(int requested, int visible, const Env& env) {
  if (requested >= visible || visible <= 0) {
    const auto cvd = env.get("CUDA_VISIBLE_DEVICES");
    const std::string where =
        " (" + (cvd ? "CUDA_VISIBLE_DEVICES=" + *cvd : std::string("CUDA_VISIBLE_DEVICES unset")) +
        ")";
    if (visible <= 0) throw UsageError("no CUDA device visible" + where, "check nvidia-smi");
    throw UsageError("--gpu " + std::to_string(requested) + ": only " + std::to_string(visible) +
                         " CUDA device(s) visible" + where,
                     "give --gpu 0 to " + std::to_string(visible - 1) +
                         " (ordinals count the visible devices only)");
  }
  if (requested >= 0) return {requested, "--gpu " + std::to_string(requested)};
  for (const char* var : kLocalRankVars) {
    const auto value = env.get(var);
    if (!value) continue;
    int rank = -1;
    const char* end = value->data() + value->size();
    const auto [ptr, ec] = std::from_chars(value->data(), end, rank);
    if (ec != std::errc() || ptr != end || rank < 0) continue;  // not a local rank: ignore it
    return {rank % visible, std::string(var) + "=" + *value + " modulo " + std::to_string(visible) +
                                " visible device(s)"};
  }
  return {0, "device 0 (no --gpu and no local rank in the environment)"};
}

}  // namespace gpudiag::numerics
