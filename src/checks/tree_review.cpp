// The check's reviewer for the tree (see tree_review.h).
#include "checks/tree_review.h"

#include <algorithm>

#include "checks/record.h"
#include "checks/verdict.h"

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
  return encode_review(out);
}

std::string CheckTreeReviewer::merge(const std::string&, const std::vector<std::string>& reviews) {
  CheckpointReview out;
  std::vector<nlohmann::json> prints;
  auto add_unique = [](std::vector<std::string>& to, const std::vector<std::string>& from) {
    for (const auto& line : from)
      if (std::find(to.begin(), to.end(), line) == to.end()) to.push_back(line);
  };
  for (const auto& text : reviews) {
    CheckpointReview r;
    try {
      r = decode_review(text);
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
    if (!r.fingerprint.is_null()) prints.push_back(std::move(r.fingerprint));
    merge_root_ids(out.nccl_ids, r.nccl_ids);  // each group's roots, for every rank
  }
  std::sort(out.failures.begin(), out.failures.end());
  std::sort(out.labels.begin(), out.labels.end());
  for (auto* lines : {&out.conflicts, &out.warnings})
    if (lines->size() > kReviewNames) {
      const auto more = lines->size() - kReviewNames;
      lines->resize(kReviewNames);
      lines->push_back("(" + std::to_string(more) + " more in the groups' reviews)");
    }
  // Each group compared its own nodes: the job's comparison adds them up
  // (ranks and hosts compared, every group's differences and findings, up to
  // the usual few); a difference between two whole groups is not seen.
  if (prints.size() == 1) out.fingerprint = std::move(prints[0]);
  if (prints.size() > 1) {
    nlohmann::json j;
    std::size_t ranks = 0, hosts = 0, fields = 0, more_d = 0, more_f = 0;
    auto diffs = nlohmann::json::array(), finds = nlohmann::json::array();
    auto num = [](const nlohmann::json& p, const char* k) -> std::size_t {
      auto it = p.find(k);
      return it != p.end() && it->is_number_unsigned() ? it->get<std::size_t>() : 0;
    };
    for (const auto& p : prints) {
      if (!p.is_object()) continue;
      ranks += num(p, "ranks_compared");
      hosts += num(p, "hosts");
      fields = std::max(fields, num(p, "fields_compared"));
      more_d += num(p, "more_differences");
      more_f += num(p, "more_findings");
      for (const char* k : {"differences", "findings"}) {
        auto it = p.find(k);
        if (it == p.end() || !it->is_array()) continue;
        const bool is_diff = std::string(k) == "differences";
        auto& to = is_diff ? diffs : finds;
        for (const auto& d : *it) {
          if (to.size() < kReviewNames) to.push_back(d);
          else ++(is_diff ? more_d : more_f);
        }
      }
    }
    j["ranks_compared"] = ranks;
    j["hosts"] = hosts;
    j["fields_compared"] = fields;
    j["differences"] = std::move(diffs);
    j["more_differences"] = more_d;
    j["findings"] = std::move(finds);
    j["more_findings"] = more_f;
    j["within_groups"] = prints.size();
    out.fingerprint = std::move(j);
  }
  return encode_review(out);
}

}  // namespace gpudiag
