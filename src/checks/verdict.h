// Reading a checkpoint's table: which ranks are missing, which failed, and
// which conflicts only a whole-job view shows (two ranks on one GPU, world
// sizes or backends that disagree). Pure functions over records, so every
// rank reaches the same conclusions from the same table.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checks/nccl_root_ids.h"
#include "checks/record.h"
#include "compute/judge.h"
#include "plane/plane.h"
#include <nlohmann/json.hpp>

namespace gpudiag {

/// "rank 3 [node2-1]" (host and local rank once known).
std::string rank_label(const RankRecord& r);
std::string rank_label(int rank, const std::optional<RankRecord>& known);

/// Whole-job conflicts visible at the exchange, one line each, naming ranks.
std::vector<std::string> exchange_conflicts(const std::vector<std::optional<RankRecord>>& table);

/// Ranks that share a GPU under distinct NCCL_HOSTIDs (allowed: NCCL then
/// treats each as a host of its own); one note per GPU, for the report.
std::vector<std::string> shared_gpu_notes(const std::vector<std::optional<RankRecord>>& table);

/// Version differences between ranks (warnings, not failures).
std::vector<std::string> version_differences(const std::vector<std::optional<RankRecord>>& table);

/// Hosts running more ranks than they have CPUs: "vm: 6 ranks on 2 CPUs".
std::vector<std::string> oversubscribed_hosts(
    const std::vector<std::optional<RankRecord>>& table);
std::vector<std::string> oversubscribed_hosts(const RankSlots<std::optional<RankRecord>>& table);

/// What the judge (rank 0) tells every rank about a checkpoint's table, so
/// the others need not read it: a few failures by name and the count of the
/// rest, the exchange's conflicts and warnings, labels of a few missing ranks.
/// Its size does not grow with the job (beyond texts that name ranks, which
/// the plane caps).
struct CheckpointReview {
  std::vector<std::pair<int, std::string>> failures;  ///< rank, "rank 3 [h-1] failed in p: why"
  int failed = 0;                                     ///< every failed rank, listed or not
  std::vector<std::string> conflicts, warnings;       ///< at the exchange
  bool oversubscribed = false;                        ///< a host runs more ranks than CPUs
  std::vector<std::pair<int, std::string>> labels;    ///< of missing ranks, as last known
  /// The exchange's fingerprint comparison (world/fingerprint_compare.h,
  /// comparison_json); null at the other checkpoints.
  nlohmann::json fingerprint;
  /// A tree's group judge's summary of its table's fingerprints
  /// (world/fingerprint_summary.h), for the root to compare across groups;
  /// null elsewhere (the root's merge drops it before the digest).
  nlohmann::json fingerprint_summary;
  /// At the exchange: the NCCL unique ids of bootstrap roots 1.. that the
  /// table carries (nccl_root_ids.h), for every rank; empty with one root.
  std::vector<NcclRootId> nccl_ids;
  /// At the exchange: the compute phase's checksums per GPU model and GEMM
  /// (compute/judge.h), from which each rank reads its own verdict.
  ComputeTallies compute;
};

/// Ranks named in a review's lists, at most.
inline constexpr std::size_t kReviewNames = 8;

/// Reviews this checkpoint's records (`now`, nullopt for the missing) against
/// the table as it was (`before`, for the labels of ranks now missing).
CheckpointReview review_table(const std::vector<std::optional<RankRecord>>& now,
                              const std::vector<std::optional<RankRecord>>& before,
                              const std::vector<int>& missing, bool exchange);
/// The same with `before` looked up (nullptr: never heard from), so a table
/// held sparsely is not copied for it.
CheckpointReview review_table(const std::vector<std::optional<RankRecord>>& now,
                              const std::function<const RankRecord*(int)>& before,
                              const std::vector<int>& missing, bool exchange);
std::string encode_review(const CheckpointReview& r);
/// Throws on text that is not a review.
CheckpointReview decode_review(const std::string& text);

/// Joins problems into one line: the first, then "(+N more)".
std::string one_line(const std::vector<std::string>& problems);

}  // namespace gpudiag
