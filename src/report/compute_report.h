// Rank 0's report of the compute phase (compute/judge.h) from the final
// table: the line below the summary table ("compute: bf16, fp16 and fp32
// GEMM checksums identical on 4 ranks (...), 1.5 s"), the SLOW warnings of
// the rate (judged only on GPUs, and only when no host runs more ranks than
// it has CPUs), and each rank's `compute` object in --json.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "checks/check.h"

namespace gpudiag {

struct ComputeReport {
  std::string line;                   ///< "compute: ...\n", "" when no rank ran it
  std::map<int, std::string> slow;    ///< rank -> its SLOW warning
  bool rates_judged = false;
  std::string not_judged_why;         ///< "host backend", "node1: 6 ranks on 2 CPUs"
  /// The line and the warnings, as rank 0 prints them.
  std::string text() const;
};

ComputeReport compute_report(const CheckResult& result);

/// A rank's `compute` object for --json: checksum (the GEMMs' in order,
/// "/"-joined), agrees (null when not compared), tflops, verdict ("ok",
/// "slow", "differs", "unstable", "alone", "not run"), and the record's
/// details (model, device, parts, seconds, finding).
nlohmann::json compute_json(const RankRecord& rec, const ComputeReport& report);

}  // namespace gpudiag
