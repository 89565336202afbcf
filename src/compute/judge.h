// Judging the compute phase across the job, as the exchange's review carries
// it. The judge (rank 0, or each group's judge in a tree, merged at the root)
// tallies the checksums per GPU model and GEMM; the tally goes to every rank
// in the review, and each rank reads its own verdict from it, so no rank needs
// another's record and the review stays small (a bounded list per model).
//
// The reference checksum of a model's GEMM is the one most of its ranks give:
// more than any other checksum, and at least two. A rank whose checksum is not
// the reference "differs"; when there is no reference (two ranks that
// disagree, or a tie) every rank of that model differs, and with two the line
// says a third would name the bad one. One rank of a model is "alone".
// Where the known checksums list a rank's exact key, they are its reference
// instead, and this comparison only adds how many peers agree (compute/known.h).
//
// The rate is judged by rank 0 from the final table (slow_ranks): against the
// median TFLOP/s of the same model's ranks, only on GPUs and only when no
// host runs more ranks than it has CPUs; a slow rank is a warning.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "compute/result.h"

namespace gpudiag {

/// One model's checksums of one GEMM, most common first.
struct ComputeTally {
  std::string model, part;
  std::vector<std::pair<std::string, int>> checksums;
  int others = 0;  ///< ranks whose checksum was cut from the list
  int total() const;
};
using ComputeTallies = std::vector<ComputeTally>;

/// A review's bounds: models x GEMMs, and checksums listed per tally.
inline constexpr std::size_t kMaxComputeTallies = 24;
inline constexpr std::size_t kTallyChecksums = 8;

/// Counts a rank's checksums (one that ran and was stable).
void tally_compute(ComputeTallies& t, const ComputeRecord& r);
/// Adds another judge's tallies (a tree's groups).
void merge_compute(ComputeTallies& into, const ComputeTallies& from);
/// Most common first, then the review's bounds (the cut are counted in `others`).
void bound_compute(ComputeTallies& t);

nlohmann::json compute_tallies_json(const ComputeTallies& t);
/// A peer's text: entries out of shape are dropped, the bounds kept.
ComputeTallies compute_tallies_from_json(const nlohmann::json& j);

struct ComputeJudgement {
  std::string judged;   ///< ComputeRecord::judged
  std::string finding;  ///< "differs": the line
};
ComputeJudgement judge_compute(const ComputeTallies& t, const ComputeRecord& mine);

/// The rate's verdict: below this fraction of its model's median is SLOW.
inline constexpr double kComputeSlowFraction = 0.8;

struct ComputeRank {
  int rank = 0;
  std::string label;  ///< "rank 3 [node2-1]"
  const ComputeRecord* compute = nullptr;
};

/// The ranks below kComputeSlowFraction of their model's median TFLOP/s
/// (models with 2 ranks or more), as "rank 3 [n-3]: 212.0 TFLOP/s, 55% of the
/// median of the 8 GPUs of its model, NVIDIA H200 (385.1 TFLOP/s); SM clock
/// 1005/1980 MHz, throttled: HW slowdown" (a GPU's clocks as NVML gave them,
/// world/nvml_clocks.h, or "clocks unknown (why)"); ranks that differ or are
/// unstable are left out of the medians.
std::vector<std::pair<int, std::string>> slow_ranks(const std::vector<ComputeRank>& ranks);

/// The warning for one of slow_ranks' texts: "compute SLOW: <text>; a GPU held
/// below its clocks (power, heat) slows the whole job: see nvidia-smi ...".
std::string compute_slow_warning(const std::string& slow_text);

/// Rank 0's line: "compute: bf16, fp16 and fp32 GEMM checksums identical on 4
/// ranks (NVIDIA H200, median 412.3 TFLOP/s), 1.5 s" (and the ranks that
/// differ); "" when no rank ran the phase.
std::string compute_summary(const std::vector<ComputeRank>& ranks, bool rates_judged,
                            const std::string& not_judged_why);

}  // namespace gpudiag
