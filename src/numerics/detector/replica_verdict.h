// Replica divergence, offline: `gpudiag scan DIR` over the files ReplicaCheck
// wrote (formats/replica_sums.h) prints the line the live check raised,
//
//   replicas diverged at step 20: rank 2 differs from ranks 0-1,3 in 1 of 6 tensors: fc1.weight
//
// with the same rule and words as scripts/replica_check.py's verdict(): within
// one replica group, at the first step whose rows of checksums differ, the row
// held by more ranks than any other is the majority and the lowest rank that
// differs from it is named ("(so do ranks ...)" for the others); without a
// majority (two replicas, a tie) the sets of ranks that agree are named and
// no rank is blamed. The live check can also say how far the values are
// apart; the files hold only checksums, so the offline line names the tensors.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace gpudiag::numerics {

struct ReplicaVerdict {
  std::string message;
  int rank = -1;                    ///< the replica the majority says is wrong; -1 none
  std::vector<std::size_t> differ;  ///< indices of the tensors that differ
};

/// The verdict for one step: ranks[i] holds rows[i], its checksums in the
/// order of `names`; nullopt when every row agrees.
std::optional<ReplicaVerdict> replica_verdict(std::uint64_t step, const std::vector<int>& ranks,
                                              const std::vector<std::string>& names,
                                              const std::vector<std::vector<std::uint64_t>>& rows);

/// Reads every replica file, compares each group's ranks step by step, and
/// prints one verdict line per group that diverged on `out` (a summary line
/// on stderr otherwise); fills `json` ({"groups": [...]}) when not null.
/// Returns true when a group diverged. Throws UsageError on a bad file.
bool check_replica_files(const std::vector<std::string>& files, std::ostream& out,
                         nlohmann::ordered_json* json);

}  // namespace gpudiag::numerics
