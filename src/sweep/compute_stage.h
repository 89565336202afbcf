// The compute phase in the sweep's first stage (every node on its own). Each
// rank runs check's known-answer GEMMs (compute/run.h) after its memory test;
// the judge (rank 0, which reads every rank's record at the exchange) tallies
// the checksums per GPU model and GEMM and judges each rank as check's
// exchange does (compute/judge.h). A rank whose checksum is not its model's
// majority, or whose own repetitions disagree, fails its node: FAILED, with
// the finding in its row, and excluded. The rate is judged as check judges it
// (only on GPUs, and only when no host runs more ranks than it has CPUs): a
// SLOW rank is a warning beside the table, never an exclusion.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checks/record.h"

namespace gpudiag::sweep {

struct ComputeStage {
  /// Ranks whose compute result failed them: rank, "rank 3 [node2-1] failed
  /// in compute: compute result differs from 7 of 8 GPUs of its model (...)".
  std::vector<std::pair<int, std::string>> failed;
  std::string line;  ///< compute_summary's line, no newline; "" when no rank ran the phase
  bool rates_judged = false;
  std::vector<std::string> slow;  ///< "compute SLOW: rank 3 [node2-1]: ..." (warnings)
};

/// The judge's verdicts from the exchange's table (ranks that failed before
/// the phase, or did not run it, are left out).
ComputeStage judge_compute_stage(const std::vector<std::optional<RankRecord>>& table);

}  // namespace gpudiag::sweep
