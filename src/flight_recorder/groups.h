// The process groups of a job and where each member stands in each (analysis.h says how the
// counters are made). Used by analyze(); apart so the rules read on their own.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "flight_recorder/analysis.h"

namespace gpudiag::fr {

/// One rank's view of one group: its counters and the collectives its buffer still holds.
struct Track {
  RankTrack t;
  std::map<std::int64_t, std::pair<State, const Op*>> seqs;  ///< seq -> furthest state, op

  /// Where seq `s` got on this rank: from its buffer's entry when it holds one, else from
  /// the counters (a seq below what it completed was completed, and so on).
  State state(std::int64_t s) const;
};

struct Group {
  GroupReport report;
  std::vector<Track> tracks;  ///< members with a dump, by rank

  /// The op of `seq` as the lowest rank whose buffer holds it recorded it; nullptr if none.
  const Op* op(std::int64_t seq) const;
  /// Every member-with-a-dump's state at `seq`.
  std::map<int, State> states(std::int64_t seq) const;
};

/// Every group any dump names, with its members' tracks, sorted by name (numbers by value).
std::vector<Group> build_groups(const Inputs& inputs);

}  // namespace gpudiag::fr
