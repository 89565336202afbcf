// The digest rank 0 publishes at each checkpoint of a store plane
// (cp/<n>/digest), so the other ranks read one small value instead of every
// record: who is missing and what is known of them, why the checkpoint was
// aborted, and the judge's review of the table. JSON:
//   {"missing":[3,7],"notes":{"3":"pid .. on ..","7":".."},"aborted":"..","review":".."}
// The review is the check's (checks/verdict.h); at the exchange it also
// carries the NCCL unique ids of the communicator's bootstrap roots past the
// first (checks/nccl_root_ids.h), at most 64, so every rank gets them here.
// Notes are kept for the first 64 missing ranks, so the digest stays under
// the store's value limit even when thousands are missing. A digest read back
// comes from the store and is not trusted: ranks out of range are dropped,
// records (tree digests only) taken for at most 16 ranks,
// texts cut to one line, the review to 64 KiB.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "rendezvous/plane.h"

namespace gpudiag {

/// The review text kept in a digest, at most.
inline constexpr std::size_t kMaxDigestReview = 64 * 1024;

std::string encode_digest(const Gathered& g);

/// The same digest from the tree's root (rendezvous/tree.h), which holds no
/// table: the missing ranks with notes for some, the abort, the review, and
/// the few records every rank may read (rank 0's: its NCCL id), under
/// "records":{"0":"..."}.
std::string encode_digest(const std::vector<int>& missing, const std::map<int, std::string>& notes,
                          const std::optional<std::string>& aborted, const std::string& review,
                          const std::map<int, std::string>& records);

/// Fills `g` (sized for `size` ranks) from `text`; false when it does not
/// parse (`g.missing` is then left empty). Rank `self` is never missing.
bool decode_digest(const std::string& text, int self, int size, Gathered& g);

}  // namespace gpudiag
