// counts_differ(), compare_samples(), one_sample() (motion.h).
#include "nccl_ras/motion.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

namespace gpudiag::ras {

namespace {

const Mismatch* find(const Report& r, const Mismatch& m) {
  for (const auto& x : r.mismatches)
    if (x.comm == m.comm && x.what == m.what) return &x;
  return nullptr;
}

bool misses_ranks_of(const Report& r, const std::string& comm) {
  return std::any_of(r.missing.begin(), r.missing.end(),
                     [&](const MissingRanks& m) { return m.comm == comm; });
}

/// The value of `rank` in `later`: the group that names it, else the one group whose ranks
/// RAS did not all name (the others' values are known); nullopt when that is not one group.
std::optional<std::string> value_of(const Mismatch& later, long long rank) {
  const ValueGroup* unnamed = nullptr;
  int unnamed_groups = 0;
  for (const auto& g : later.groups) {
    for (const auto& k : g.ranks)
      if (k.rank == rank) return g.value;
    if (g.count > static_cast<long long>(g.ranks.size())) {
      unnamed = &g;
      ++unnamed_groups;
    }
  }
  if (unnamed_groups == 1) return unnamed->value;
  return std::nullopt;
}

/// Whether the ranks of `g` (a group behind in `first`) are at the same count in `later`:
/// true (some did not move), false (all moved), nullopt (cannot tell).
std::optional<bool> group_still(const ValueGroup& g, const Mismatch& first, const Mismatch& later) {
  if (g.ranks.empty()) {
    // By value: the ranks at this count later are ranks at it or below it before (counts
    // only grow); more of them than were below it means some of this group stayed.
    const long long v = std::atoll(g.value.c_str());
    long long below = 0;
    for (const auto& h : first.groups)
      if (std::atoll(h.value.c_str()) < v) below += h.count;
    for (const auto& h : later.groups)
      if (h.value == g.value) return h.count > below ? std::optional<bool>(true) : std::nullopt;
    return false;
  }
  bool unknown = false;
  for (const auto& k : g.ranks) {
    auto v = value_of(later, k.rank);
    if (!v) {
      unknown = true;
      continue;
    }
    if (*v == g.value) return true;
  }
  if (unknown) return std::nullopt;
  return false;
}

void compare(Mismatch& m, const Report& later) {
  m.still.clear();
  m.later.clear();
  const Mismatch* l = find(later, m);
  if (!l) {
    // The counts agree in the second sample: the ranks behind caught up, unless the
    // communicator lost ranks meanwhile (then agreeing says nothing).
    m.motion = misses_ranks_of(later, m.comm) ? Motion::unknown : Motion::moved;
    return;
  }
  m.later = l->groups;
  long long top = -1;
  for (const auto& g : m.groups) top = std::max(top, std::atoll(g.value.c_str()));
  bool unknown = false;
  for (const auto& g : m.groups) {
    if (std::atoll(g.value.c_str()) >= top) continue;
    auto still = group_still(g, m, *l);
    if (!still)
      unknown = true;
    else if (*still)
      m.still.push_back(g.value);
  }
  m.motion = !m.still.empty() ? Motion::still : unknown ? Motion::unknown : Motion::moved;
}

}  // namespace

bool counts_differ(const Report& r) {
  return std::any_of(r.mismatches.begin(), r.mismatches.end(),
                     [](const Mismatch& m) { return m.counts(); });
}

void compare_samples(Report& first, const Report& later, double gap_s) {
  first.samples = 2;
  first.sample_gap_s = gap_s;
  first.one_sample_why.clear();
  for (auto& m : first.mismatches)
    if (m.counts()) compare(m, later);
}

void one_sample(Report& r, std::string why) {
  r.samples = 1;
  r.one_sample_why = std::move(why);
  for (auto& m : r.mismatches) m.motion = Motion::unknown;
}

}  // namespace gpudiag::ras
