// How each rank of a check ended, as rank 0 tells it: the one verdict per rank
// that the summary line, the table and the JSON report all print, so they
// never disagree.
//
//   ok        its own record at the last checkpoint said OK (nothing else is OK)
//   broken    present at the end, failed on its own (timeout: a wait of its own ran out)
//   stopped   present at the end, failed because another rank failed or vanished:
//             its reason names that rank first, and that rank is not OK
//   dead      vanished, and a launcher reported its death (killed by a signal, exited)
//   gone      reported (a record, or a phase through the plane), then stopped
//             arriving: stopped, hung or unreachable
//   missing   never heard from at all
//
// A rank that vanished carries two places, labelled the same everywhere: the
// last phase it reported (what the store's progress note, or else its last
// record, said) and the checkpoint where the others noticed it was missing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "checks/check.h"

namespace gpudiag {

struct RankStatus {
  enum class Kind { ok, broken, timeout, stopped, dead, gone, missing };
  int rank = 0;
  Kind kind = Kind::missing;
  std::string failed_phase;       ///< broken/timeout/stopped: where it failed
  std::optional<int> stopped_by;  ///< stopped: the rank its failure traces back to
  std::string last_phase;         ///< dead/gone: the last phase it reported
  std::string missed_at;          ///< dead/gone/missing: the checkpoint it did not reach
  std::string death;              ///< dead: "killed by SIGKILL", "exited with status 1"
  /// broken: the node's hardware evidence that failed it, with the node:
  /// "node7: Xid 79 (GPU fallen off the bus) on 0000:3b:00 at 12:03:44: reboot the node"
  std::string hardware;

  bool ok() const { return kind == Kind::ok; }
  bool vanished() const { return kind == Kind::dead || kind == Kind::gone || kind == Kind::missing; }
};

/// "ok", "broken", "timeout", "stopped", "dead", "gone", "missing" (the JSON "status").
std::string status_name(RankStatus::Kind kind);

/// One verdict per rank of `result.table`, in rank order.
std::vector<RankStatus> rank_statuses(const CheckResult& result);

/// "last phase: all-reduce; missing at the all-reduce checkpoint" (vanished
/// ranks; "" for the others). The same words in the table and the summary.
std::string whereabouts(const RankStatus& s);

int count_ok(const std::vector<RankStatus>& statuses);

/// What became of the ranks that are not OK, grouped when alike: "rank 2
/// dead: killed by SIGKILL, last phase: all-reduce, did not reach the
/// all-reduce checkpoint; ranks 0,1,3 stopped by rank 2"; a rank its node's
/// hardware broke says it: "ranks 0,1 broken in device (node node7: Xid 79 (GPU
/// fallen off the bus) on 0000:3b:00 at 12:03:44: reboot the node)"; "" when
/// all are OK.
std::string not_ok_phrase(const std::vector<RankStatus>& statuses);

}  // namespace gpudiag
