// The check's judgement in a tree of judges (tree/tree.h): a node's or
// group's table is reviewed as rank 0 reviews a flat job's
// (checks/verdict.h, review_table), and the root merges its groups' reviews:
// failures and missing ranks' labels up to the usual few by name with the
// count of all, conflicts and warnings from every group. Each group compares
// its own nodes' fingerprints and, at the exchange, sends a summary of them
// up with its review; the root compares the summaries across the whole job
// (tree_fingerprint.h) and drops them from the digest. A record or a group's
// review that cannot be read counts as a failure, never as OK; a record that
// should carry a bootstrap root's NCCL id is named as such. The ids of the
// roots a group's table holds go up in its review, and the root's merge
// passes them all to every rank (nccl_root_ids.h); the compute phase's
// checksum tallies are summed the same way (compute/judge.h). A judge between the
// groups and the root (a supergroup) merges its groups' reviews the same way
// and sends up their summaries merged into one (merge_up), so the root still
// compares the whole job.
#pragma once

#include <map>
#include <string>

#include "tree/tree.h"

namespace gpudiag {

class CheckTreeReviewer : public TreeReviewer {
 public:
  std::string review(const std::string& checkpoint, const std::map<int, std::string>& records,
                     const std::vector<int>& missing,
                     const std::map<int, std::string>& notes) override;
  std::string merge(const std::string& checkpoint,
                    const std::vector<ChildReview>& reviews) override;
  /// A supergroup's merge: as merge(), and the children's summaries of
  /// fingerprints merged into one for the root.
  std::string merge_up(const std::string& checkpoint,
                       const std::vector<ChildReview>& reviews) override;

 private:
  std::string merge_reviews(const std::vector<ChildReview>& reviews, bool up);
  std::map<int, std::string> labels_;  ///< "rank 3 [node2-1]" as last seen, for missing ranks
};

}  // namespace gpudiag
