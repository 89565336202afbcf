// gpudiag sweep, the part every rank runs: its device (as check's device
// phase) and compute phase (compute_stage.h), the exchange (identity, fingerprint, the pair endpoint), then the
// rounds the judge (rank 0) hands out, two checkpoints each:
//
//   sweep-K-peers  each rank reads its partner's record (endpoint, NCCL id);
//   (measure)      the pair exchanges, bounded by --pair-timeout;
//   sweep-K        each rank reports its pair; the judge records the round,
//                  plans the next one and sends it as its review.
//
// The plane is patient (plane.h): a rank that dies or fails does not cut the
// others' waits short; it is named missing at the next checkpoint, and the
// sweep goes on without it. Only rank 0's loss ends the sweep (it plans).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checks/check.h"
#include "sweep/plan.h"

namespace gpudiag::sweep {

struct SweepOptions {
  std::string backend = "auto";  ///< auto | nccl | host
  std::uint64_t bytes = 0;       ///< 0: 64 MiB on GPUs, 4 MiB on the host backend
  int iters = 5;
  double timeout_s = 60;         ///< any wait for peers at a checkpoint
  double pair_timeout_s = 30;    ///< one pair's whole measurement
  double time_budget_s = 300;
  int device = -1;
  std::string nccl_lib;
  std::uint64_t mem_bytes = 0;   ///< the device phase's test; 0: 256 MiB GPU, 16 MiB host
  /// The compute phase after it (sweep/compute_stage.h): its seconds, < 0
  /// the backend's default (compute/run.h); --no-compute: off.
  double compute_seconds = -1;
  bool compute = true;
  std::vector<std::string> expected_hosts;  ///< hosts the pool should have (named if absent)
  /// The judge's: hosts left out of every round, and why (--exclude-history:
  /// history/tally.h hosts_at_fault); each is FAILED with its reason.
  std::vector<std::pair<std::string, std::string>> left_out;
};

/// One round as the judge saw it, for the report.
struct RoundSummary {
  int index = 0;
  std::string stage;
  int pairs = 0;     ///< rank pairs measured
  double seconds = 0;
};

struct SweepOutcome {
  /// This rank's own trouble ("" none): it could not take part, or lost the judge.
  std::string error;
  bool timed_out = false;
  /// From the judge's last review, on every rank: nodes to exclude.
  int excluded = -1;  ///< -1 unknown (the sweep did not finish)
  std::string report_host;  ///< rank 0's host: where the report and files are
  // The judge's (rank 0's) view; empty elsewhere.
  std::vector<NodeVerdict> verdicts;
  Layout layout;
  std::vector<std::string> hosts;  ///< node -> host; those that never arrived last
  std::vector<NodeTest> tests;     ///< every test, for the per-pair metrics
  std::vector<std::pair<int, int>> test_nodes;
  std::vector<RoundSummary> rounds;
  std::vector<int> ranks_per_node;
  double seconds = 0;
  std::string backend;
  std::string gpu_name, nccl_version;
  nlohmann::json fingerprint;  ///< the exchange's comparison (comparison_json) or null
  std::string compute_line;    ///< the compute phase's summary ("" not run)
  bool compute_rates_judged = false;
  int compute_slow = 0;        ///< SLOW warnings among `warnings`
  std::vector<std::string> warnings;
  std::uint64_t bytes = 0;
};

/// `advertise_host` and `token`: the host/tcp meter's address and the job's
/// token (as the check's ring: world_setup.h ring_address, job_token.h).
SweepOutcome run_sweep(const SweepOptions& options, CheckSetup& setup,
                       const std::string& advertise_host, const std::string& token);

/// Nodes excluded by `verdicts`: every state but OK.
std::vector<std::string> excluded_hosts(const SweepOutcome& o);

}  // namespace gpudiag::sweep
