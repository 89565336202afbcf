// The digest rank 0 publishes at each checkpoint of a store plane
// (cp/<n>/digest), so the other ranks read one small value instead of every
// record: who is missing and what is known of them, why the checkpoint was
// aborted, and the judge's review of the table. JSON:
//   {"missing":[3,[7,9]],"missing_count":4,"notes":{"3":"pid .. on ..","7-9":".."},
//    "aborted":"..","review":".."}
// The review is the check's (checks/verdict.h); at the exchange it also
// carries the NCCL unique ids of the communicator's bootstrap roots past the
// first (checks/nccl_root_ids.h), at most 64, so every rank gets them here.
// The missing ranks go as ranges (a lone rank as its number), at most
// kMaxMissingRanges of them with the count of all ("missing_count"): 50,000
// ranks of a lost rack are one range, and thousands scattered past the bound
// are the first ranges and a number (Gathered::missing_unlisted), so the
// digest stays far under the store's value limit (store_limits.h). Notes are
// kept for the first 64 missing ranks, a run of consecutive ranks with the
// same note (a lost node's, a lost group's) as one key "first-last", so a
// lost node adds one note, not eight, to what every rank reads. A digest read back comes from the store and is not trusted: one whose
// ranges are not in order, inside the world and within the bound is refused
// (as a digest that does not parse), notes are taken for at most 64 ranks
// (ranges included), records (tree digests only) for at most 16 ranks, texts cut to one line, the review to 64 KiB.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "plane/plane.h"

namespace gpudiag {

/// The review text kept in a digest, at most.
inline constexpr std::size_t kMaxDigestReview = 64 * 1024;
/// Ranges of missing ranks a digest lists, at most (8 to 18 bytes each).
inline constexpr std::size_t kMaxMissingRanges = 4096;

std::string encode_digest(const Gathered& g);

/// The same digest from the tree's root (tree/tree.h), which holds no
/// table: the missing ranks with notes for some, the abort, the review, and
/// the few records every rank may read (rank 0's, where a rank asked for it:
/// its NCCL id, the sweep's plan), under "records":{"0":"..."}.
std::string encode_digest(const std::vector<int>& missing, const std::map<int, std::string>& notes,
                          const std::optional<std::string>& aborted, const std::string& review,
                          const std::map<int, std::string>& records);

/// Fills `g` (sized for `size` ranks) from `text`; false when it does not
/// parse (`g.missing` is then left empty). Rank `self` is never missing.
bool decode_digest(const std::string& text, int self, int size, Gathered& g);

}  // namespace gpudiag
