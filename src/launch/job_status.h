// The exit status of a whole job under gpudiag launch, decided from how every
// rank ended, never from which one ended first: the same fault gives the same
// status on every run, however the ranks' exits race.
//
// The rule, first that applies (README, "Exit status"):
//   (a) the launcher was interrupted (SIGINT, SIGTERM, SIGHUP): 128 + it;
//   (b) a rank exited 4 (internal error): 4;
//   (c) a rank exited 2 (bad command line, environment or input): 2;
//   (d) a rank died of a signal the launcher had not sent it (SIGSEGV, a
//       SIGKILL from outside): 128 + the signal of the lowest such rank;
//   (e) a rank exited 1 (it saw a failure it can name): 1, but not a rank
//       that exited after the launcher's own deadline or hang stop reached
//       it (its collective failed because the job was being stopped);
//   (f) a rank exited 3 (a peer did not answer in time), or the launcher's
//       own --timeout or --exit-timeout stopped the job: 3;
//   (g) any other non-zero exit code: that of the lowest such rank;
//   otherwise 0. Ranks the launcher killed itself (after another failure, at
// its --timeout or --exit-timeout, or when it was interrupted) are effects of
// the job's end, not causes, so their signals never count under (d). As a
// safety net, a job with a rank that never ended or did not end OK is never
// 0 (1 then); the launcher only kills after one of (a)-(g) already applies.
#pragma once

#include <vector>

#include "launch/summary.h"

namespace gpudiag::launch {

/// How the launcher itself ended the job, whatever its ranks did.
struct JobStop {
  /// The first SIGINT, SIGTERM or SIGHUP the launcher got while ranks ran; 0: none.
  int interrupted_by = 0;
  /// Its --timeout expired, or it killed a rank at --exit-timeout.
  bool deadline = false;
  /// Some ranks never ended, even after SIGKILL.
  bool gave_up = false;
};

/// The launcher's exit status for ranks that ended as `ranks` say (in any
/// order). A rank whose `killed_by_launcher` is set does not count under (d).
int job_exit_status(const std::vector<RankOutcome>& ranks, const JobStop& stop);

}  // namespace gpudiag::launch
