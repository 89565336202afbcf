// What a rank keeps of the other ranks from one checkpoint to the next, in
// memory that grows with what it saw, not with the job: the records it read
// (every one on the judge, a few elsewhere), and, for ranks that stopped
// arriving, the checkpoint each missed, the one it was last seen at and the
// plane's note on it. A rank of a 100,000-rank job holds a few records and
// the missing ranks' lines, plus the list of live ranks (4 bytes a rank),
// where a slot per rank per field held ~100 MB. The check (checks/check.cpp)
// runs note_checkpoint() after each gather; the simulator runs it for one
// rank per worker to report its peak (sim/sim_nodes.cpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "checks/check.h"
#include "plane/plane.h"

namespace gpudiag {

/// Brings `result` up to the checkpoint `name` from what the plane gathered:
/// records read, `live`, and the missing ranks' bookkeeping (last_seen,
/// missed_at, missing_note). Time: the ranks read and missing, plus one pass
/// over the live list.
void note_checkpoint(CheckResult& result, const Gathered& g, const std::string& name);

/// The table as one slot per rank (rank 0's report and bench's printer,
/// which hold every rank anyway).
std::vector<std::optional<RankRecord>> dense_records(const RankSlots<std::optional<RankRecord>>& t);

/// Bytes `result` holds of other ranks (records, the missing ranks' strings,
/// the live list): what the simulator reports as a rank's check state.
std::size_t peer_bytes(const CheckResult& result);

}  // namespace gpudiag
