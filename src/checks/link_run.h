// gpudiag bench --links, measured: every pair of ranks in the turns of the
// round-robin schedule (links.h), each pair's exchanges checked element by
// element and timed, the median per peer recorded in the rank's record.
#pragma once

#include <cstdint>

#include "checks/record.h"
#include "comm/communicator.h"

namespace gpudiag {

struct LinkRun {
  Communicator& comm;
  Workspace& workspace;
  RankRecord& me;              ///< gets links, link_bytes, link_schedule
  int n = 1;                   ///< ranks in the job
  int iters = 1, warmup = 0;   ///< --iters, --warmup
  double timeout_s = 60;       ///< each wait for a peer
  std::uint64_t link_bytes = 0;
  bool serial = false;         ///< one pair at a time instead of a round at once
  double turn_wait_factor = 3;  ///< a turn's barrier waits this many timeouts
};

/// Measures this rank's link to every peer; throws what the communicator
/// throws, or an Error naming the peer whose data arrived wrong.
void run_link_test(LinkRun& r);

}  // namespace gpudiag
