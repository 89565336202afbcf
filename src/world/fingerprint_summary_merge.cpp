// Merging groups' summaries of fingerprints and comparing the result
// (fingerprint_summary.h). The parts are disjoint (each group speaks for its
// own ranks), so a value's ranges, rank and host counts add up across them.
// A field one part never saw is what compare_fingerprints would read for it
// on each of that part's ranks: "unset" for a setting, "unknown" otherwise
// (left out where unknown says nothing); only a complete part can say so.
// The merged summary is compared field by field: two values or more make a
// Difference with a ValueGroup per value (its ranges as the parts listed
// them, the ranks and hosts not listed counted), classified as in a flat job.
#include <algorithm>
#include <map>

#include "world/fingerprint_summary.h"

namespace gpudiag {

namespace {

/// Distinct fields a merge keeps (the flat comparison's bound).
constexpr std::size_t kMaxMergedFields = 1024;

struct MergedValue {
  RankRanges ranges;
  long long ranks = 0, host_count = 0;
  std::vector<std::string> hosts;
};

struct MergedField {
  std::map<std::string, MergedValue> values;
  long long more_values = 0, more_ranks = 0;
};

void add(MergedValue& to, const RankRanges& ranges, long long ranks,
         const std::vector<std::string>& hosts, long long host_count) {
  to.ranges.insert(to.ranges.end(), ranges.begin(), ranges.end());
  to.ranks += ranks;
  to.host_count += host_count;
  for (const auto& h : hosts)
    if (std::find(to.hosts.begin(), to.hosts.end(), h) == to.hosts.end()) to.hosts.push_back(h);
}

std::string absent_value(const std::string& field) {
  return field.starts_with("env.") ? "unset" : "unknown";
}

}  // namespace

FingerprintSummary merge_summaries(const std::vector<FingerprintSummary>& parts) {
  FingerprintSummary out;
  std::map<std::string, MergedField> fields;
  std::vector<std::string> hosts;
  for (const auto& p : parts) {
    out.ranks.insert(out.ranks.end(), p.ranks.begin(), p.ranks.end());
    out.rank_count += p.rank_count;
    out.host_count += p.host_count;
    out.more_fields += p.more_fields;
    hosts.insert(hosts.end(), p.hosts.begin(), p.hosts.end());
    for (const auto& f : p.fields) {
      if (!fields.count(f.field) && fields.size() >= kMaxMergedFields) {
        ++out.more_fields;
        continue;
      }
      auto& m = fields[f.field];
      m.more_values += f.more_values;
      m.more_ranks += f.more_ranks;
      for (const auto& v : f.values)
        add(m.values[v.value], v.ranges, v.ranks, v.hosts, v.host_count);
    }
  }
  // A field a complete part did not list: absent on every one of its ranks.
  for (auto& [name, m] : fields) {
    const std::string absent = absent_value(name);
    if ((absent == "unknown" && unknown_is_silent(name)) || absent_is_silent(name)) continue;
    for (const auto& p : parts) {
      if (!p.complete() || p.rank_count == 0) continue;
      const bool listed = std::any_of(p.fields.begin(), p.fields.end(),
                                      [&](const SummaryField& f) { return f.field == name; });
      if (!listed) add(m.values[absent], p.ranks, p.rank_count, p.hosts, p.host_count);
    }
  }
  out.ranks = normalized(std::move(out.ranks));
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  if (hosts.size() > kSummaryHosts) hosts.resize(kSummaryHosts);
  out.hosts = std::move(hosts);
  for (auto& [name, m] : fields) {
    SummaryField f{name, {}, m.more_values, m.more_ranks};
    for (auto& [value, v] : m.values) {
      std::sort(v.hosts.begin(), v.hosts.end());
      if (v.hosts.size() > kSummaryHosts) v.hosts.resize(kSummaryHosts);
      f.values.push_back(
          {value, normalized(std::move(v.ranges)), v.ranks, std::move(v.hosts), v.host_count});
    }
    out.fields.push_back(std::move(f));
  }
  return out;
}

FingerprintComparison compare_summary(const FingerprintSummary& s) {
  FingerprintComparison out;
  auto clamp = [](long long v) { return static_cast<int>(std::min<long long>(v, 1 << 30)); };
  out.ranks = clamp(s.rank_count);
  out.hosts = clamp(s.host_count);
  out.fields = clamp(static_cast<long long>(s.fields.size()));
  for (const auto& f : s.fields) {
    Difference d{f.field, is_host_field(f.field), false, {}, ""};
    for (const auto& v : f.values) {
      if (v.value == "unknown" && unknown_is_silent(f.field)) continue;
      ValueGroup g;
      g.value = v.value;
      g.ranges = v.ranges;
      g.more_ranks = static_cast<std::size_t>(std::max<long long>(0, v.ranks - ranks_in(v.ranges)));
      g.hosts = v.hosts;
      g.more_hosts = static_cast<std::size_t>(
          std::max<long long>(0, v.host_count - static_cast<long long>(v.hosts.size())));
      d.groups.push_back(std::move(g));
    }
    if (f.more_values > 0) {  // values a part counted without listing them
      ValueGroup g;
      g.value = "(" + std::to_string(f.more_values) + " more values, not listed)";
      g.more_ranks = static_cast<std::size_t>(f.more_ranks);
      d.groups.push_back(std::move(g));
    }
    if (d.groups.size() < 2) continue;
    std::stable_sort(d.groups.begin(), d.groups.end(),
                     [](auto& a, auto& b) { return a.first_rank() < b.first_rank(); });
    classify_difference(d);
    out.differences.push_back(std::move(d));
  }
  std::stable_sort(out.differences.begin(), out.differences.end(),
                   [](auto& a, auto& b) { return a.broken > b.broken; });
  return out;
}

}  // namespace gpudiag
