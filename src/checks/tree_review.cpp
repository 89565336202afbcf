// The check's reviewer for the tree (see tree_review.h); the job's
// fingerprint block at the root is tree_fingerprint.h's.
#include "checks/tree_review.h"

#include <algorithm>

#include "checks/record.h"
#include "checks/tree_fingerprint.h"
#include "checks/verdict.h"
#include "world/fingerprint_summary.h"

namespace gpudiag {

std::string CheckTreeReviewer::review(const std::string& checkpoint,
                                      const std::map<int, std::string>& records,
                                      const std::vector<int>& missing,
                                      const std::map<int, std::string>&) {
  std::vector<std::optional<RankRecord>> now;
  now.reserve(records.size());
  std::vector<int> unreadable;  // records that are not a record of their rank
  for (const auto& [r, text] : records) {
    try {
      auto rec = decode(text);
      if (rec.rank != r) throw std::runtime_error("another rank's");
      if (labels_.size() < 65536 || labels_.count(r)) labels_[r] = rank_label(rec);
      now.push_back(std::move(rec));
    } catch (const std::exception&) {
      unreadable.push_back(r);
    }
  }
  auto out = review_table(now, nullptr, missing, checkpoint == "exchange");
  // Not judged is not OK: a record that cannot be read counts as a failure,
  // and one that should carry a bootstrap root's NCCL id says so (the plan
  // as the table's other records give it).
  int world = 0, roots = 0;
  for (const auto& rec : now)
    if (rec && rec->backend == "nccl") {
      world = rec->world_size;
      roots = rec->nccl_roots;
      break;
    }
  for (int r : unreadable) {
    const std::string root = root_maker_note(r, world, roots);
    if (out.failures.size() < kReviewNames)
      out.failures.emplace_back(r, "rank " + std::to_string(r) + "'s record could not be read" +
                                       (root.empty() ? "" : " (" + root + ")"));
    ++out.failed;
  }
  for (std::size_t i = 0; i < missing.size() && out.labels.size() < kReviewNames; ++i)
    if (auto it = labels_.find(missing[i]); it != labels_.end())
      out.labels.emplace_back(missing[i], it->second);
  if (checkpoint == "exchange") {  // for the comparison across groups
    std::vector<RankPrint> prints;
    for (const auto& rec : now)
      if (rec) prints.push_back({rec->rank, rec->host, &rec->fingerprint});
    out.fingerprint_summary = summary_json(summarize_fingerprints(prints));
  }
  return encode_review(out);
}

std::string CheckTreeReviewer::merge(const std::string&, const std::vector<ChildReview>& reviews) {
  return merge_reviews(reviews, false);
}

std::string CheckTreeReviewer::merge_up(const std::string&,
                                        const std::vector<ChildReview>& reviews) {
  return merge_reviews(reviews, true);
}

std::string CheckTreeReviewer::merge_reviews(const std::vector<ChildReview>& reviews, bool up) {
  CheckpointReview out;
  std::vector<GroupPrints> prints;
  auto add_unique = [](std::vector<std::string>& to, const std::vector<std::string>& from) {
    for (const auto& line : from)
      if (std::find(to.begin(), to.end(), line) == to.end()) to.push_back(line);
  };
  if (reviews.size() == 1 && up) return reviews[0].text;  // the root merges it
  if (reviews.size() == 1) {
    // One part (the root of an ungrouped tree, or the one group heard): its
    // review as it is, without the summary only the root needed.
    try {
      auto r = decode_review(reviews[0].text);
      r.fingerprint_summary = nullptr;
      return encode_review(r);
    } catch (const std::exception&) {
    }
  }
  for (const auto& child : reviews) {
    CheckpointReview r;
    try {
      r = decode_review(child.text);
    } catch (const std::exception&) {
      // A part of the job nobody can vouch for: not OK.
      if (out.failures.size() < kReviewNames)
        out.failures.emplace_back(-1, "a group's review could not be read: its ranks were not judged");
      ++out.failed;
      continue;
    }
    for (auto& f : r.failures)
      if (out.failures.size() < kReviewNames) out.failures.push_back(std::move(f));
    out.failed = static_cast<int>(
        std::min<long long>(1LL << 30, static_cast<long long>(out.failed) + std::max(0, r.failed)));
    add_unique(out.conflicts, r.conflicts);
    add_unique(out.warnings, r.warnings);
    out.oversubscribed = out.oversubscribed || r.oversubscribed;
    for (auto& l : r.labels)
      if (out.labels.size() < kReviewNames) out.labels.push_back(std::move(l));
    if (!r.fingerprint.is_null() || !r.fingerprint_summary.is_null())
      prints.push_back(
          {std::move(r.fingerprint), std::move(r.fingerprint_summary), child.first, child.last});
    merge_root_ids(out.nccl_ids, r.nccl_ids);  // each group's roots, for every rank
    merge_compute(out.compute, r.compute);      // each group's checksums, counted for the job
  }
  bound_compute(out.compute);
  // The job's fingerprints, compared across the groups (tree_fingerprint.h);
  // a difference broken across groups only stops the job as a flat one does.
  auto job = merge_group_prints(prints);
  out.fingerprint = std::move(job.fingerprint);
  if (up) {
    // The root compares the whole job: it gets this level's summaries as one.
    std::vector<FingerprintSummary> parts;
    for (const auto& p : prints)
      if (auto s = decode_summary(p.summary, p.first, p.last)) parts.push_back(std::move(*s));
    if (!parts.empty()) out.fingerprint_summary = summary_json(merge_summaries(parts));
  }
  add_unique(out.conflicts, job.conflicts);
  std::sort(out.failures.begin(), out.failures.end());
  std::sort(out.labels.begin(), out.labels.end());
  for (auto* lines : {&out.conflicts, &out.warnings})
    if (lines->size() > kReviewNames) {
      const auto more = lines->size() - kReviewNames;
      lines->resize(kReviewNames);
      lines->push_back("(" + std::to_string(more) + " more in the groups' reviews)");
    }
  return encode_review(out);
}

}  // namespace gpudiag
