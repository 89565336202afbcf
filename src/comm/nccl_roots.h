// How many bootstrap roots the check's NCCL communicator starts from, and
// which rank makes each root's unique id.
//
// With one unique id every rank checks in with one bootstrap root, and NCCL
// staggers the connections of a root's ranks once it has more than 256
// (NCCL_UID_STAGGER_THRESHOLD), at 7,000 a second (NCCL_UID_STAGGER_RATE;
// src/bootstrap.cc bootstrapInit): the last of 100,000 ranks waits 14 s
// before it even connects, and the root then accepts, reads and answers each
// in turn, all within the check's --timeout. ncclCommInitRankScalable (NCCL
// 2.23) takes nId unique ids, the same array on every rank, and splits the
// ranks between their roots in blocks (rootIdFromRank: the first nranks %
// nId roots take one rank more), so each root's stagger and accepts cover
// nranks / nId ranks. A root runs where its id was made (ncclGetUniqueId
// starts it); NCCL does not check who made which, but its guide
// (usage/communicators, "rankHasRoot") has the first rank of each root's
// block make that root's id, which spreads the roots over the job's hosts.
// gpudiag does so: rank 0 makes root 0's, rank nccl_root_first_rank(i) root i's.
//
// GPUDIAG_NCCL_ROOTS=auto (the default) keeps one root up to
// kNcclRanksPerRoot ranks, then takes one root per kNcclRanksPerRoot ranks,
// at most kMaxNcclRoots: a root's last rank waits at most 2048 / 7000 =
// 0.3 s up to 131,072 ranks, and every rank reads kMaxNcclRoots ids at most
// (nccl_root_ids.h). GPUDIAG_NCCL_ROOTS=N asks for N (1-64; at most the
// ranks). One root whatever was asked when the NCCL has no
// ncclCommInitRankScalable (before 2.23), and when NCCL_COMM_ID is set: NCCL
// then makes every id that one address and has rank 0 alone drop the others
// (src/init.cc ncclCommInitRankDev: "NCCL_COMM_ID cannot be used with more
// than one ncclUniqueId"), so rank 0's root and the others' would disagree
// and the init would hang (src/bootstrap.cc bootstrapRoot: "mismatch in info
// from procs").
#pragma once

#include <string>

#include "util/env.h"

namespace gpudiag {

inline constexpr int kNcclRanksPerRoot = 2048;
inline constexpr int kMaxNcclRoots = 64;

/// GPUDIAG_NCCL_ROOTS from `env`: 0 for auto (or unset), else 1-64. Throws
/// UsageError naming the variable for anything else.
int nccl_roots_setting(const Env& env);

/// What a rank plans: `roots` (1: ncclCommInitRankConfig; more:
/// ncclCommInitRankScalable) and, when fewer than asked for or than auto
/// would take, why.
struct NcclRootPlan {
  int roots = 1;
  int wanted = 1;   ///< what the setting alone gives
  std::string why;  ///< "NCCL 2.21.5 has no ncclCommInitRankScalable (2.23+)", or ""
  /// "ncclCommInitRankScalable with 49 roots", "ncclCommInitRankConfig with one root".
  std::string describe() const;
};

/// The plan for `nranks` ranks under `setting` (nccl_roots_setting), with an
/// NCCL of `nccl_version` that has ncclCommInitRankScalable or not, and
/// NCCL_COMM_ID set or not. Every rank with the same inputs plans the same.
NcclRootPlan plan_nccl_roots(int nranks, int setting, int nccl_version, bool has_scalable,
                             bool comm_id_set);

/// "ncclCommInitRankScalable with 4 roots" / "ncclCommInitRankConfig with one root".
std::string describe_nccl_init(int roots);

// NCCL's split of ranks between roots (src/bootstrap.cc, v2.23.4-1 on); each
// takes 0 <= root < nroots <= nranks, 0 <= rank < nranks.

/// The first rank of root `root`'s block (firstRankFromRoot).
int nccl_root_first_rank(int root, int nranks, int nroots);
/// The root rank `rank` checks in with (rootIdFromRank).
int nccl_root_of_rank(int rank, int nranks, int nroots);
/// The ranks of root `root` (nRankFromRoot).
int nccl_root_ranks(int root, int nranks, int nroots);
/// The root whose id `rank` makes (the guide's rankHasRoot: the first rank of
/// the root's block), or -1. Out-of-range arguments give -1.
int nccl_root_made_by(int rank, int nranks, int nroots);

}  // namespace gpudiag
