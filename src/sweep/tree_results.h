// A sweep round's results as the judge (rank 0) takes them, in a flat job
// and under node leaders (tree/tree.h) alike.
//
// Each rank reports its end of its pair at the round's checkpoint
// (sweep-K: {"k":K,"p":partner,"ok":..,"gbps":..,"why":..}). Both ends of a
// rank pair fold into one result as the planner takes them (plan.h): failed
// when either end failed, with the lower rank's reason when it failed, else
// the higher's; the faster end's GB/s (the slower includes waiting for the
// other end to arrive), a failed end counting 0. Folding is the same whoever
// does it and in whatever order, so results can be folded where they are:
//
//   flat         rank 0 folds every rank's report (RoundResults::add_report);
//   tree         each group's judge folds its nodes' reports into its part's
//                review (SweepTreeReviewer::review: the pairs its 128 nodes
//                measured, ends inside the group joined, ~40 bytes a pair),
//                the root joins the groups' (for_judge) and leaves the result
//                for rank 0 alone beside the digest (cp/<n>/judge); no record
//                of a rank reaches rank 0, and the digest every rank reads
//                stays small.
//
// Text form (from another process: not trusted):
//   {"k":K,"pairs":[[a,b,ends,ok,gbps,"why"],...],"cut":N}
// ends: 1 a reported, 2 b reported, 3 both. A sender's pairs whose reporting
// ends lie outside the ranks it speaks for are dropped; values out of range
// drop the pair; reasons are cut to kMaxResultWhy. A text larger than its
// budget keeps the first pairs and counts the rest in "cut" (the judge warns;
// those pairs count as unreported).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tree/tree.h"
#include "sweep/plan.h"

namespace gpudiag::sweep {

/// A pair's failure reason kept in a folded result, at most.
inline constexpr std::size_t kMaxResultWhy = 120;
/// A group's folded results, at most (its part's review holds 192 KiB).
inline constexpr std::size_t kGroupResultsBudget = 160 * 1024;
/// The root's share for rank 0, at most (a store value holds 1 MiB): about
/// 22,000 rank pairs, a round of 44,000 ranks.
inline constexpr std::size_t kJudgeResultsBudget = 900 * 1024;

/// One rank pair's result as one or both of its ends reported it.
struct PairEnds {
  int a = 0, b = 0;    ///< ranks, a < b
  unsigned ends = 0;   ///< 1: a reported, 2: b reported
  bool ok = true;
  double gbps = 0;     ///< the faster end's; a failed end counts 0
  std::string why;     ///< a's reason when a failed, else b's
};

/// Folds `other` into `into` (the same pair): ends already in `into` are not
/// taken again.
void fold_ends(PairEnds& into, const PairEnds& other);

/// The results of round `round`, folded by rank pair.
class RoundResults {
 public:
  explicit RoundResults(int round) : round_(round) {}
  /// Rank `rank`'s report; false (and nothing kept) when it is not a report
  /// of this round with a partner among `world` ranks and sane values.
  bool add_report(int rank, const std::string& report, int world);
  void add(const PairEnds& p);
  /// Another fold of the same round (a group's); counts its cut pairs.
  void add(const RoundResults& other);
  /// The text form, at most `budget` bytes.
  std::string encode(std::size_t budget) const;
  /// nullopt when `text` is not this form; pairs with an end outside
  /// [first, last] or a rank outside the world are dropped.
  static std::optional<RoundResults> decode(const std::string& text, int first, int last,
                                            int world);
  /// One result per pair, for Planner::record.
  std::vector<PairResult> pair_results() const;
  int round() const { return round_; }
  /// Pairs left out of a text for its budget, along the way.
  int cut() const { return cut_; }
  std::size_t size() const { return pairs_.size(); }

 private:
  int round_ = 0;
  std::map<std::pair<int, int>, PairEnds> pairs_;
  int cut_ = 0;
};

/// K of a round's results checkpoint ("sweep-K"); nullopt for any other name.
std::optional<int> results_round(const std::string& checkpoint);

/// The tree's reviewer for a job that may be a sweep: a round's results
/// checkpoint is folded as above; the sweep's other checkpoints need no
/// review from the tree (the plan travels in rank 0's record, which every
/// digest carries); any other checkpoint is `others`' (the check's).
class SweepTreeReviewer : public TreeReviewer {
 public:
  SweepTreeReviewer(int world, std::unique_ptr<TreeReviewer> others)
      : world_(world), others_(std::move(others)) {}
  std::string review(const std::string& checkpoint, const std::map<int, std::string>& records,
                     const std::vector<int>& missing,
                     const std::map<int, std::string>& notes) override;
  std::string merge(const std::string& checkpoint,
                    const std::vector<ChildReview>& reviews) override;
  std::string for_judge(const std::string& checkpoint,
                        const std::vector<ChildReview>& reviews) override;
  /// A judge between the groups and the root: a round's results joined (as
  /// for_judge joins them) for its parent to join again.
  std::string merge_up(const std::string& checkpoint,
                       const std::vector<ChildReview>& reviews) override;

 private:
  int world_;
  std::unique_ptr<TreeReviewer> others_;
};

/// The reviewer every judge of a job's tree runs: a sweep's rounds folded
/// as above, any other checkpoint the check's (checks/tree_review.h).
std::unique_ptr<TreeReviewer> job_reviewer(int world);

}  // namespace gpudiag::sweep
