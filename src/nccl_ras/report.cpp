// merge() and rank_list() (report.h).
#include "nccl_ras/report.h"

#include <algorithm>

#include "util/strings.h"

namespace gpudiag::ras {

std::string rank_list(std::vector<long long> ranks) { return rank_ranges(std::move(ranks)); }

namespace {

void add_processes(std::vector<ProcessRef>& into, const std::vector<ProcessRef>& from) {
  for (const auto& p : from)
    if (std::none_of(into.begin(), into.end(), [&](const ProcessRef& q) { return q.same(p); }))
      into.push_back(p);
}

std::size_t named(const std::vector<ValueGroup>& groups) {
  std::size_t n = 0;
  for (const auto& g : groups) n += g.ranks.size();
  return n;
}

/// Adds `item` unless one with the same key is there; keeps the one naming more ranks.
template <class T, class Same, class Weight>
void add_keyed(std::vector<T>& into, const T& item, Same same, Weight weight) {
  for (auto& have : into)
    if (same(have, item)) {
      if (weight(item) > weight(have)) have = item;
      return;
    }
  into.push_back(item);
}

}  // namespace

std::vector<ProcessRef> named_processes(const Report& r) {
  std::vector<ProcessRef> out;
  auto add = [&](const ProcessRef& p) {
    if (p.pid >= 0) add_processes(out, {p});
  };
  for (const auto& p : r.seen) add(p);
  for (const auto& p : r.dead) add(p);
  for (const auto& p : r.unresponsive) add(p);
  for (const auto& m : r.missing)
    for (const auto& k : m.ranks) add(k.process);
  for (const auto& m : r.mismatches)
    for (const auto& g : m.groups)
      for (const auto& k : g.ranks) add(k.process);
  for (const auto& e : r.errors)
    for (const auto& k : e.ranks) add(k.process);
  return out;
}

Report merge(const std::vector<Report>& reports) {
  if (reports.size() == 1) return reports.front();
  Report out;
  for (const auto& r : reports) {
    if (out.nccl_version.empty()) out.nccl_version = r.nccl_version;
    if (out.format.empty()) out.format = r.format;
    out.nodes = std::max(out.nodes, r.nodes);
    out.processes = std::max(out.processes, r.processes);
    out.gpus = std::max(out.gpus, r.gpus);
    out.communicators = std::max(out.communicators, r.communicators);
    out.dead_count = std::max(out.dead_count, r.dead_count);
    out.unresponsive_count = std::max(out.unresponsive_count, r.unresponsive_count);
    out.timeouts = std::max(out.timeouts, r.timeouts);
    out.collection_s = std::max(out.collection_s, r.collection_s);
    out.rows_unreliable = out.rows_unreliable || r.rows_unreliable;
    add_processes(out.seen, r.seen);
    add_processes(out.dead, r.dead);
    add_processes(out.unresponsive, r.unresponsive);
    for (const auto& m : r.missing)
      add_keyed(
          out.missing, m, [](const auto& a, const auto& b) { return a.comm == b.comm; },
          [](const auto& x) { return x.ranks.size(); });
    for (const auto& m : r.mismatches)
      add_keyed(
          out.mismatches, m,
          [](const auto& a, const auto& b) { return a.comm == b.comm && a.what == b.what; },
          [](const auto& x) { return named(x.groups); });
    for (const auto& e : r.errors)
      add_keyed(
          out.errors, e,
          [](const auto& a, const auto& b) {
            return a.comm == b.comm && a.phase == b.phase && a.error == b.error;
          },
          [](const auto& x) { return x.ranks.size(); });
    for (const auto& n : r.notes)
      if (std::find(out.notes.begin(), out.notes.end(), n) == out.notes.end())
        out.notes.push_back(n);
  }
  out.dead_count = std::max(out.dead_count, static_cast<long long>(out.dead.size()));
  out.unresponsive_count =
      std::max(out.unresponsive_count, static_cast<long long>(out.unresponsive.size()));
  return out;
}

}  // namespace gpudiag::ras
