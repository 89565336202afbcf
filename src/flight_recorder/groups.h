// The process groups of a job and where each member stands in each (analysis.h says how the
// counters are made). Used by analyze(); apart so the rules read on their own.
//
// A group is its name *and* its members, as PyTorch's own analyser keys them
// (tools/flight_recorder/components/builder.py, build_groups_memberships: pg_guid is the name
// plus a hash of the rank set): split_group and DeviceMesh give every subgroup of one split
// the same name (distributed_c10d.py, split_group: one _process_group_name for the call), so
// the TP groups of a mesh are all named "1", each with its own ranks. A rank's entries belong
// to the group its own pg_config gives that name.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "flight_recorder/analysis.h"

namespace gpudiag::fr {

/// A send or recv in a rank's buffer.
struct P2p {
  std::int64_t record_id = -1, seq = -1;  ///< seq: p2p_seq_id
  State state = State::scheduled;
  const Op* op = nullptr;
};

/// One rank's view of one group: its counters and the collectives its buffer still holds.
struct Track {
  RankTrack t;
  std::vector<P2p> p2p;  ///< its sends and recvs in the group, in record order
  std::map<std::int64_t, std::pair<State, const Op*>> seqs;  ///< seq -> furthest state, op
  std::map<std::int64_t, std::int64_t> record;  ///< seq -> its first record_id in the buffer

  /// Where seq `s` got on this rank: from its buffer's entry when it holds one, else from
  /// the counters (a seq below what it completed was completed, and so on).
  State state(std::int64_t s) const;
};

struct Group {
  GroupReport report;
  std::vector<Track> tracks;  ///< members whose dump tells where they are in it, by rank

  /// The op of `seq` as the lowest rank whose buffer holds it recorded it; nullptr if none.
  const Op* op(std::int64_t seq) const;
  /// Every tracked member's state at `seq`.
  std::map<int, State> states(std::int64_t seq) const;
};

/// Every group any dump names, with its members' tracks, sorted by name (numbers by value),
/// then by members. Notes about names several member sets share go to `notes`.
std::vector<Group> build_groups(const Inputs& inputs, std::vector<std::string>& notes);

}  // namespace gpudiag::fr
