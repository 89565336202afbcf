// The job's fingerprint block at the root of a tree of judges (tree_review.h).
// Each group compares its own nodes (world/fingerprint_compare.h) and sends
// with its review a summary of its fingerprints (world/fingerprint_summary.h).
// The root reads each summary against the ranks its group speaks for, merges
// them and compares the whole job: the differences, their lines and "drift"
// lines are those of a flat job's comparison, and the block says it compared
// across the groups. A group whose summary cannot be read is still counted by
// its own comparison (its differences and findings, "compared only within
// themselves"). Findings (values wrong on their own) are each group's.
//
// A difference that is broken across the job (another NCCL version, a net
// plugin on some groups only) but uniform inside every group was seen by no
// group: its line is returned for the review's conflicts, as a flat judge
// stops the job on it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpudiag {

struct GroupPrints {
  nlohmann::json comparison;  ///< the group's comparison_json (may be null)
  nlohmann::json summary;     ///< its summary_json (may be null)
  int first = 0, last = 0;    ///< the ranks it speaks for
};

struct JobPrints {
  nlohmann::json fingerprint;          ///< for the review (null: none given)
  std::vector<std::string> conflicts;  ///< broken only across groups
};

JobPrints merge_group_prints(const std::vector<GroupPrints>& groups);

}  // namespace gpudiag
