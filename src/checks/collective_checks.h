// The check's verified collectives over the job's communicator: an
// all-reduce of every rank's pattern (check.h's --size and --large-size),
// an all-gather and a broadcast from the last rank, every element compared
// exactly with what the ranks contributed (verify.h). A wrong element throws
// an Error naming the collective, the element, and the rank to suspect.
#pragma once

#include <cstdint>

#include "comm/communicator.h"

namespace gpudiag {

struct CollectiveChecks {
  Communicator& comm;
  Workspace& workspace;
  int rank = 0, size = 1;
  double timeout_s = 60;  ///< each collective's wait for peers

  /// All-reduces `bytes` of this rank's contribution and checks the sum.
  /// Returns the buffer, still allocated in the workspace, for timing.
  float* all_reduce(std::uint64_t bytes) const;
  /// An all-gather of `bytes` per rank and a broadcast of 4x that from the
  /// last rank (so a root other than 0 is exercised), both checked.
  void all_gather_and_broadcast(std::uint64_t bytes) const;
};

}  // namespace gpudiag
