// The per-checkpoint bookkeeping of what a rank knows of the others
// (peer_book.h), sparse: it touches the records read, the ranks missing now
// and the ranks that were missing before, never a slot per rank. The live
// list is rebuilt in one merge pass against the (ascending) missing list.
#include "checks/peer_book.h"

#include <algorithm>
#include <vector>

namespace gpudiag {

namespace {

bool listed(const std::vector<int>& sorted, int r) {
  return std::binary_search(sorted.begin(), sorted.end(), r);
}

/// Erases the stored slots of ranks that are not missing now.
template <class T>
void forget_present(RankSlots<T>& slots, const std::vector<int>& missing) {
  std::vector<std::size_t> back;
  for (const auto& [r, v] : slots.written())
    if (!listed(missing, static_cast<int>(r))) back.push_back(r);
  for (auto r : back) slots.erase(r);
}

std::size_t string_bytes(const std::string& s) { return sizeof s + (s.size() > 15 ? s.capacity() : 0); }

}  // namespace

void note_checkpoint(CheckResult& res, const Gathered& g, const std::string& name) {
  const int n = static_cast<int>(res.table.size());
  const int me = res.me.rank;
  std::vector<int> missing;
  missing.reserve(g.missing.size());
  for (int r : g.missing)
    if (r >= 0 && r < n && r != me) missing.push_back(r);
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  // A rank missing now keeps the checkpoint it was last seen at; every other
  // rank was seen at this one (the default from now on).
  for (int r : missing) res.last_seen[r];  // stores the current default, if not stored yet
  res.last_seen.set_default(name);
  forget_present(res.last_seen, missing);
  forget_present(res.missed_at, missing);
  for (int r : missing) {
    if (res.missed_at.at(r).empty()) res.missed_at[r] = name;  // the first it missed
    const std::string& note = static_cast<std::size_t>(r) < g.notes.size() ? g.notes.at(r) : "";
    if (!note.empty()) res.missing_note[r] = note;
  }
  for (const auto& [r, rec] : g.records.written())
    if (rec && static_cast<int>(r) < n && !listed(missing, static_cast<int>(r)))
      res.table[r] = decode(*rec);
  res.live.clear();
  res.live.reserve(static_cast<std::size_t>(n) - missing.size());
  auto next = missing.begin();
  for (int r = 0; r < n; ++r) {
    if (next != missing.end() && *next == r) {
      ++next;
      continue;
    }
    res.live.push_back(r);
  }
}

std::vector<std::optional<RankRecord>> dense_records(const RankSlots<std::optional<RankRecord>>& t) {
  std::vector<std::optional<RankRecord>> out(t.size());
  for (const auto& [r, rec] : t.written())
    if (r < out.size()) out[r] = rec;
  return out;
}

std::size_t peer_bytes(const CheckResult& res) {
  std::size_t bytes = res.live.capacity() * sizeof(int);
  for (const auto& [r, rec] : res.table.written()) {
    bytes += sizeof r + sizeof rec;
    if (rec) bytes += encode(*rec).size();  // its strings and maps, about as large as its text
  }
  for (const auto* slots : {&res.last_seen, &res.missed_at, &res.missing_note})
    for (const auto& [r, s] : slots->written()) bytes += sizeof r + string_bytes(s);
  return bytes;
}

}  // namespace gpudiag
