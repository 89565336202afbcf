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

#include <vector>

#include "flight_recorder/analysis.h"
#include "flight_recorder/groups.h"

namespace gpudiag::fr {

/// Fills rep.waits, rep.suspect_ranks, rep.waiting_ranks, rep.in_flight_ranks and each
/// finding's causes, waiting and in_flight, from rep.findings and the groups they came from.
void reduce_causes(Report& rep, const std::vector<Group>& groups);

}  // namespace gpudiag::fr
