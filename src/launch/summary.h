// The launcher's last word: one line on stderr saying how many ranks were OK
// and how the others ended, grouped so that 256 ranks killed alike take one
// phrase ("ranks 0-254 killed by SIGTERM").
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "launch/exit_status.h"
#include "util/strings.h"

namespace gpudiag::launch {

struct RankOutcome {
  int rank = 0;
  /// nullopt: it never ended (still stuck after SIGKILL).
  std::optional<ExitStatus> status;
  bool first_failure = false;
  bool stopped_by_launcher = false;
  /// It died of a signal the launcher itself had sent it (so the death is an
  /// effect of the job's end, not a cause; see job_status.h).
  bool killed_by_launcher = false;
  /// Its exit 1 was a gpudiag subcommand's verdict (verdict_file.h), not a failure.
  std::string verdict;
};

using gpudiag::format_ranks;  // util/strings.h

/// "4/4 ranks OK", or e.g. "1/4 ranks OK; rank 3 exited with status 1 (first
/// failure); ranks 0,2 killed by SIGTERM (stopped by the launcher)". A rank
/// killed by a signal is "stopped by the launcher" only if the launcher sent
/// that signal (killed_by_launcher). Ranks that exited with a verdict
/// (RankOutcome::verdict) are "finished", e.g. "4/4 ranks finished; their
/// verdict: sweep: 1 node to exclude".
/// `note` (e.g. "interrupted by SIGINT"), when not empty, is appended.
std::string job_summary(const std::vector<RankOutcome>& outcomes, const std::string& note);

}  // namespace gpudiag::launch
