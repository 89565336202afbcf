// Causes and victims across groups: who waits for whom, and where the waiting ends.
//
// A rank waits where it queued work and has not completed it; of all that work, in all its
// groups, what it queued first (the lowest record_id; a collective its buffer lost is older
// still) is where it is held, since what it queued later waits behind it (the NCCL streams
// wait for the compute stream, which waits for the collectives it consumes). At a collective
// it waits for the members that have not got as far: those that never scheduled it, and those
// that never started it where it did (when their dumps time starts), plus members without a
// dump, who may be why. At a send or recv it waits for its peer (named in the op, "nccl:send
// 0->1" in group ranks), unless, in a pair, the peer's send/recv of the same number (p2p_seq_id)
// has started too. Each rank points at those it waits for; following the arrows from any rank
// leads to ranks that wait for nobody, or to a cycle of ranks that wait for each other, with
// no way out (a terminal strongly connected component; Tarjan's algorithm).
//
// A rank is in flight where it started its oldest pending work and nobody holds it: every
// member started (or completed) that collective, or, for one that completes on a rank only
// once every member joined (all_reduce, all_gather, reduce_scatter, all_to_all), a peer
// completed it; or the peer of its send/recv started its side. Its kernel runs, and what it
// has not queued or started since waits behind it: nothing of that makes it a cause. That is
// what a dump of a running job shows, ranks a collective apart; in a job stopped for minutes
// it means the collective is stuck below NCCL's kernels (the network), where no rank is to
// blame.
//
// A rank a finding names is a cause only there, at the end of the waiting: a rank missing
// from group A because it is held in group B, where another rank is missing, is a victim,
// not a cause. Ranks in a cycle with no way out are all causes (a deadlock, or a cause the
// dumps cannot single out). Every rank that waits and is not a cause is in waiting_ranks.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "flight_recorder/analysis.h"
#include "flight_recorder/groups.h"

namespace gpudiag::fr {

/// A group's tracked members by their state at any seq, without visiting each member per
/// question: the counters sorted once, and the seqs their buffers hold (which override the
/// counters: Track::state) indexed by seq. What the rules ask once a member stays near-linear
/// in the members and entries, where asking every peer would take the square of them.
class Census {
 public:
  explicit Census(const Group& g);
  /// How many tracked members are in each state at `seq`, indexed by State.
  std::array<std::size_t, 4> count(std::int64_t seq) const;
  /// Group::op(seq).
  const Op* op(std::int64_t seq) const;
  /// The tracked member `rank`, or nullptr.
  const Track* track(int rank) const;
  /// The members other than `x` that hold `x` at `seq`: never scheduled it, or never started
  /// it where they time starts and `x` started it; by rank.
  std::vector<int> holding(const Track& x, std::int64_t seq) const;

 private:
  const Group* g_;
  std::vector<std::int64_t> completed_, started_, enqueued_;  ///< each sorted
  std::vector<const Track*> by_started_, by_enqueued_, rest_by_enqueued_;  ///< see holding
  std::map<std::int64_t, std::vector<const Track*>> held_;  ///< seq -> buffers holding it
  std::map<std::int64_t, std::array<std::size_t, 4>> held_count_;
  std::map<std::int64_t, const Op*> ops_;
  mutable std::map<std::pair<std::int64_t, bool>, std::vector<int>> holding_;  ///< a cache
};

/// Fills rep.waits, rep.suspect_ranks, rep.waiting_ranks, rep.in_flight_ranks and each
/// finding's causes, waiting and in_flight, from rep.findings and the groups they came from.
void reduce_causes(Report& rep, const std::vector<Group>& groups);

}  // namespace gpudiag::fr
