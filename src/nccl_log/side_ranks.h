// What each rank's PyTorch watchdog lines say (side_line.h), gathered while a job's files are
// read, and NCCL's DIAG report lines.
//
// PyTorch's lines carry no host:pid, so a rank is known by the file it is in and the launcher
// prefix in front of its lines ("[rank3]:", which torch 2.2+ writes itself, or a launcher's).
// Lines with no launcher prefix are taken by the "[Rank N]" they print; once the whole input is
// read, a file whose unprefixed lines name at most one such rank is one process (a per-rank
// file), and all its unprefixed lines are merged into one rank. Per rank and process group only
// the latest sequence-number status and the first of each failure are kept, so a long run's
// periodic status lines cost no memory; the number of ranks is bounded by the caller.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "nccl_log/rank_summary.h"
#include "nccl_log/side_line.h"

namespace gpudiag::nccl_log {

struct SideEvent {
  SideLine line;
  Evidence where;
};

/// One rank's PyTorch watchdog lines.
struct TorchRank {
  std::string key;    ///< file and launcher prefix (or "[Rank N]"): unique per rank
  std::string label;  ///< "rank 3" (the launcher's rank, else the "[Rank N]" printed), or the file
  std::string file;
  int launcher_rank = -1;
  int global_rank = -1;  ///< the launcher's rank, else its rank in the default group; -1 unknown
  std::optional<SideEvent> timeout;               ///< its first collective timeout
  std::map<std::string, SideEvent> status;        ///< process group -> latest status line
  std::map<std::string, SideEvent> error_status;  ///< process group -> first error-path status
  std::optional<SideEvent> failed, teardown, error, heartbeat;  ///< the first of each
  std::vector<int> printed_ranks;  ///< distinct "[Rank N]" of lines with no process group

  /// The process group its timeout happened in: the group of the error-path status at the
  /// timed-out work, else the only group it has an error-path status for; empty when unknown.
  std::string timeout_group() const;
};

class SideCollector {
 public:
  explicit SideCollector(std::size_t max_ranks) : max_ranks_(max_ranks) {}
  /// Keeps what `line` (line `lineno` of `file`, raw text `raw`) says.
  void add(const SideLine& line, const std::string& file, std::size_t lineno, std::string_view raw);
  /// The ranks, per-rank files merged (see above), sorted by global rank then label; the
  /// collector is empty afterwards.
  std::vector<TorchRank> finish();
  /// NCCL DIAG lines, in reading order (the first 64).
  std::vector<SideEvent>& diag() { return diag_; }
  std::size_t dropped() const { return dropped_; }  ///< lines of ranks past max_ranks

 private:
  std::size_t max_ranks_;
  std::vector<TorchRank> ranks_;
  std::unordered_map<std::string, std::size_t> index_;
  std::vector<SideEvent> diag_;
  std::size_t dropped_ = 0;
};

}  // namespace gpudiag::nccl_log
