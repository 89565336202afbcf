// The NCCL unique ids of a job's bootstrap roots, as they travel from the
// ranks that make them to every rank (comm/nccl_roots.h says how many roots
// and which rank makes each).
//
// Rank 0 makes root 0's id and every rank reads rank 0's record, as with one
// root. The id of root i >= 1 is in the record of the rank NCCL's rule names
// (nccl_root_first_rank); no rank reads that record. The judge that reads it
// (rank 0 in a flat job, a group's or the root's judge in a tree, rank 0
// through MPI's leaders) copies the id into its review of the exchange
// (CheckpointReview::nccl_ids, verdict.h), and the review reaches every rank
// in the checkpoint's digest: per rank, (roots - 1) x ~270 bytes at the
// exchange, whatever the job's size. A tree's root merges its groups' lists.
// What a review carries comes from other processes and is not trusted: at
// most kMaxNcclRoots entries, each checked against NCCL's rule for the plan it
// claims, and an id is used only when it is 256 hex digits; a root whose id
// is missing or malformed is named with the rank that should have made it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "checks/record.h"
#include "comm/nccl_api.h"
#include "util/env.h"

namespace gpudiag {

/// One root's id in a review: the rank that made it, the roots it planned
/// for (its record's nccl_roots) and the id (hex). JSON: [rank, roots, "hex"].
struct NcclRootId {
  int rank = 0;
  int roots = 0;
  std::string id;
  bool operator==(const NcclRootId&) const = default;
};

/// The ids of roots 1.. that `records` carry: a record of the NCCL backend
/// whose rank makes a root under its own plan (nccl_root_made_by) and that
/// has an id. At most kMaxNcclRoots, by rank.
std::vector<NcclRootId> root_ids_in(const std::vector<std::optional<RankRecord>>& records);

/// Adds `from` to `into` (a tree's merge): by rank, the first seen kept, at
/// most kMaxNcclRoots.
void merge_root_ids(std::vector<NcclRootId>& into, const std::vector<NcclRootId>& from);

/// "it carries the NCCL unique id of bootstrap root 1 of 49" when `rank`
/// makes a root >= 1 under `roots`; else "".
std::string root_maker_note(int rank, int world, int roots);

/// The ids this rank passes to NCCL, in root order: root 0's from rank 0's
/// record, the others from the exchange's review. Throws Error naming the
/// root and the rank that should have made it when one is missing or not
/// 256 hex digits, and when rank 0 plans another number of roots than `me`.
std::vector<std::string> nccl_init_ids(const RankRecord& me, const std::optional<RankRecord>& rank0,
                                       const std::vector<NcclRootId>& shared);

/// 256 lower- or upper-case hex digits: an ncclUniqueId as records carry it.
bool is_unique_id_hex(const std::string& hex);

/// The device phase's part: plans this rank's roots (comm/nccl_roots.h:
/// `setting` is GPUDIAG_NCCL_ROOTS, `env` says whether NCCL_COMM_ID is set)
/// into me.nccl_roots, and makes the unique id of the root this rank makes,
/// if any, into me.nccl_id. Rank 0 logs the plan, and warns when it uses
/// fewer roots than GPUDIAG_NCCL_ROOTS asked for.
void make_nccl_root_id(RankRecord& me, const NcclLibrary& nccl, const Env& env, int setting);

}  // namespace gpudiag
