// The check's judgement in a tree of judges (rendezvous/tree.h): a node's or
// group's table is reviewed as rank 0 reviews a flat job's
// (checks/verdict.h, review_table), and the root merges its groups' reviews:
// failures and missing ranks' labels up to the usual few by name with the
// count of all, conflicts and warnings from every group (each group compares
// its own nodes' fingerprints; a comparison across groups is left out, and the
// merged review says so when groups disagree).
#pragma once

#include <map>
#include <string>

#include "rendezvous/tree.h"

namespace gpudiag {

class CheckTreeReviewer : public TreeReviewer {
 public:
  std::string review(const std::string& checkpoint, const std::map<int, std::string>& records,
                     const std::vector<int>& missing,
                     const std::map<int, std::string>& notes) override;
  std::string merge(const std::string& checkpoint, const std::vector<std::string>& reviews) override;

 private:
  std::map<int, std::string> labels_;  ///< "rank 3 [node2-1]" as last seen, for missing ranks
};

}  // namespace gpudiag
