// Gathering PyTorch watchdog lines into ranks (side_ranks.h): a hash map from file and launcher
// prefix to the rank's record, per-rank files merged once every file is read.
#include "nccl_log/side_ranks.h"

#include <algorithm>
#include <tuple>

#include "util/strings.h"

namespace gpudiag::nccl_log {

namespace {

constexpr std::size_t kSideEvidenceCap = 400;
constexpr std::size_t kDiagKept = 64;
constexpr std::size_t kPrintedRanksKept = 8;

bool earlier(const SideEvent& a, const SideEvent& b) { return a.where.line < b.where.line; }

void keep_first(std::optional<SideEvent>& slot, const SideEvent& e) {
  if (!slot || earlier(e, *slot)) slot = e;
}

void note_printed_rank(TorchRank& r, int rank) {
  if (rank < 0 || r.printed_ranks.size() >= kPrintedRanksKept) return;
  if (std::find(r.printed_ranks.begin(), r.printed_ranks.end(), rank) == r.printed_ranks.end())
    r.printed_ranks.push_back(rank);
}

void absorb(TorchRank& r, const SideEvent& e) {
  const SideLine& l = e.line;
  if (l.pg.empty()) note_printed_rank(r, l.rank);
  switch (l.kind) {
    case SideKind::timeout:
    case SideKind::blocking_timeout:
      keep_first(r.timeout, e);
      break;
    case SideKind::watchdog_error:
      keep_first(r.error, e);
      if (is_timeout_text(l.detail)) {  // the exception quotes the timeout it died of
        SideEvent t = e;
        t.line.kind = SideKind::timeout;
        keep_first(r.timeout, t);
      }
      break;
    case SideKind::seq_status: {
      auto [it, added] = r.status.try_emplace(l.pg, e);
      if (!added && !earlier(e, it->second)) it->second = e;
      if (l.source == StatusSource::error) {
        auto [first, fresh] = r.error_status.try_emplace(l.pg, e);
        if (!fresh && earlier(e, first->second)) first->second = e;
      }
      break;
    }
    case SideKind::failed:
      keep_first(r.failed, e);
      break;
    case SideKind::teardown:
      keep_first(r.teardown, e);
      break;
    case SideKind::heartbeat:
      keep_first(r.heartbeat, e);
      break;
    case SideKind::diag:
      break;
  }
}

/// Folds `from` into `into` (two records of one per-rank file).
void merge(TorchRank& into, const TorchRank& from) {
  for (const auto* slot :
       {&from.timeout, &from.failed, &from.teardown, &from.error, &from.heartbeat})
    if (*slot) absorb(into, **slot);
  for (const auto& [pg, e] : from.status) absorb(into, e);
  for (const auto& [pg, e] : from.error_status) absorb(into, e);
  for (int rank : from.printed_ranks) note_printed_rank(into, rank);
}

/// The rank's global rank: the launcher's, else its rank in the default group (PG 0); a "[Rank
/// N]" line names the rank in the group of its collective, taken for the global one only when
/// the record shows no other.
int global_rank_of(const TorchRank& r) {
  if (r.launcher_rank >= 0) return r.launcher_rank;
  for (const auto* by_pg : {&r.error_status, &r.status})
    if (auto it = by_pg->find("0"); it != by_pg->end() && it->second.line.rank >= 0)
      return it->second.line.rank;
  if (r.printed_ranks.size() == 1) return r.printed_ranks.front();
  return -1;
}

}  // namespace

std::string TorchRank::timeout_group() const {
  if (!timeout) return {};
  if (!timeout->line.pg.empty()) return timeout->line.pg;
  for (const auto& [pg, e] : error_status)
    if (timeout->line.seq >= 0 && e.line.seq == timeout->line.seq) return pg;
  if (error_status.size() == 1) return error_status.begin()->first;
  return {};
}

void SideCollector::add(const SideLine& line, const std::string& file, std::size_t lineno,
                        std::string_view raw) {
  SideEvent e{line, {file, lineno, std::string(trim(raw).substr(0, kSideEvidenceCap))}};
  if (line.kind == SideKind::diag) {
    if (diag_.size() < kDiagKept) diag_.push_back(std::move(e));
    return;
  }
  std::string who = line.launcher_rank >= 0 ? line.launcher
                    : line.rank >= 0        ? "#" + std::to_string(line.rank)
                                            : "?";
  std::string key = file + '\x1f' + who;
  auto it = index_.find(key);
  if (it == index_.end()) {
    if (ranks_.size() >= max_ranks_) {
      ++dropped_;
      return;
    }
    it = index_.emplace(key, ranks_.size()).first;
    TorchRank r;
    r.key = key;
    r.file = file;
    r.launcher_rank = line.launcher_rank;
    ranks_.push_back(std::move(r));
  }
  absorb(ranks_[it->second], e);
}

std::vector<TorchRank> SideCollector::finish() {
  // Unprefixed records per file; a file whose unprefixed lines print at most one "[Rank N]"
  // outside a process group is one process.
  std::map<std::string, std::vector<std::size_t>> unprefixed;
  for (std::size_t i = 0; i < ranks_.size(); ++i)
    if (ranks_[i].launcher_rank < 0) unprefixed[ranks_[i].file].push_back(i);
  std::vector<bool> gone(ranks_.size(), false);
  for (const auto& [file, members] : unprefixed) {
    std::vector<int> printed;
    for (std::size_t i : members)
      for (int r : ranks_[i].printed_ranks)
        if (std::find(printed.begin(), printed.end(), r) == printed.end()) printed.push_back(r);
    if (members.size() < 2 || printed.size() > 1) continue;
    for (std::size_t k = 1; k < members.size(); ++k) {
      merge(ranks_[members[0]], ranks_[members[k]]);
      gone[members[k]] = true;
    }
  }
  std::vector<TorchRank> out;
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    if (gone[i]) continue;
    ranks_[i].global_rank = global_rank_of(ranks_[i]);
    ranks_[i].label = ranks_[i].global_rank >= 0 ? "rank " + std::to_string(ranks_[i].global_rank)
                                                 : ranks_[i].file;
    out.push_back(std::move(ranks_[i]));
  }
  std::stable_sort(out.begin(), out.end(), [](const TorchRank& a, const TorchRank& b) {
    return std::forward_as_tuple(a.global_rank < 0, a.global_rank, a.label) <
           std::forward_as_tuple(b.global_rank < 0, b.global_rank, b.label);
  });
  ranks_.clear();
  index_.clear();
  return out;
}

}  // namespace gpudiag::nccl_log
