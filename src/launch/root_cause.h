// Which rank of a node's failed job is the cause. The first to exit is not
// always it: on a busy machine a rank whose collective broke because a peer
// died ("Connection closed by peer", NCCL's "remote process exited", a
// watchdog timeout) can exit before the peer that raised has finished its
// own exit. Read from the ranks' error files (torch's @record), a first
// failure whose exception is such a consequence gives way to a rank whose
// exception is not, the earliest of those by the file's timestamp.
#pragma once

#include <string>
#include <vector>

#include "launch/summary.h"

namespace gpudiag::launch {

/// Whether an exception's message is a peer's failure seen from here: a
/// connection closed or reset, a remote process gone, an aborted
/// communicator, a timeout.
bool consequence_of_a_peer(const std::string& message);

struct RootCause {
  int local = -1;           ///< the local rank to name
  std::string first_words;  ///< when it is not the first to fail: the first's exception
};

/// `first` the local rank that failed first, `outcomes` every local rank's
/// end (index = local rank), error files at `error_dir`/<local>/error.json.
RootCause root_cause(int first, const std::vector<RankOutcome>& outcomes,
                     const std::string& error_dir);

}  // namespace gpudiag::launch
