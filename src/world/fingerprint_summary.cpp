// A group's summary of fingerprints (fingerprint_summary.h): building it from
// a table, its bounded JSON, and reading one back. The JSON, with short keys
// because a group of 1,024 ranks sends it at every exchange:
//   {"ranks":[[0,1023]],"n":1024,"hosts":["node0",...],"hn":128,"mf":0,
//    "fields":[{"f":"gpu.driver","mv":0,"mr":0,
//               "vals":[{"v":"535.104.05","r":[[0,1023]],"n":1024,"h":[...],"hn":128}]}]}
// Written by hand: the ranges, caps and checks are this tool's own.
#include "world/fingerprint_summary.h"

#include <algorithm>
#include <map>
#include <set>

namespace gpudiag {

namespace {

/// Which fields a summary keeps first when its bytes run short: what makes
/// NCCL hang or fail, then NCCL's settings, then the rest, then other settings.
int priority(const std::string& f) {
  if (f == "nccl.version" || f == "nccl.path" || f.starts_with("plugin.") || f == "gpu.driver")
    return 0;
  if (f.starts_with("env.NCCL_")) return 1;
  return f.starts_with("env.") ? 3 : 2;
}

RankRanges to_ranges(const std::vector<int>& ascending, std::size_t cap) {
  RankRanges out;
  for (int r : ascending) {
    if (!out.empty() && out.back().second + 1 >= r) {
      out.back().second = std::max(out.back().second, r);
      continue;
    }
    if (out.size() == cap) break;
    out.emplace_back(r, r);
  }
  return out;
}

std::vector<std::string> first_hosts(const std::set<std::string>& hosts) {
  std::vector<std::string> out;
  for (const auto& h : hosts) {
    if (out.size() == kSummaryHosts) break;
    out.push_back(h.substr(0, kSummaryHostChars));
  }
  return out;
}

nlohmann::json ranges_json(const RankRanges& r) {
  auto out = nlohmann::json::array();
  for (const auto& [a, b] : r) out.push_back({a, b});
  return out;
}

nlohmann::json field_json(const SummaryField& f) {
  nlohmann::json vals = nlohmann::json::array();
  for (const auto& v : f.values)
    vals.push_back({{"v", v.value},
                    {"r", ranges_json(v.ranges)},
                    {"n", v.ranks},
                    {"h", v.hosts},
                    {"hn", v.host_count}});
  return {{"f", f.field}, {"vals", std::move(vals)}, {"mv", f.more_values}, {"mr", f.more_ranks}};
}

std::size_t dumped(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
}

// Reading back: every check fails the whole summary (a sender that breaks a
// bound is not believed for the rest).
struct Bad {};

long long count(const nlohmann::json& o, const char* k, long long lo, long long hi) {
  auto it = o.find(k);
  if (it == o.end() || !it->is_number_integer()) throw Bad{};
  const auto v = it->get<long long>();
  if (v < lo || v > hi) throw Bad{};
  return v;
}

/// One printable line of at most `max` bytes (a peer's text goes into a report).
std::string text(const nlohmann::json& v, std::size_t max, bool allow_empty = false) {
  if (!v.is_string()) throw Bad{};
  const auto& s = v.get_ref<const std::string&>();
  if (s.size() > max || (s.empty() && !allow_empty)) throw Bad{};
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) throw Bad{};
  return s;
}

const nlohmann::json& array(const nlohmann::json& o, const char* k, std::size_t max) {
  auto it = o.find(k);
  if (it == o.end() || !it->is_array() || it->size() > max) throw Bad{};
  return *it;
}

RankRanges read_ranges(const nlohmann::json& a, int first, int last, std::size_t max) {
  if (!a.is_array() || a.size() > max) throw Bad{};
  RankRanges out;
  for (const auto& e : a) {
    if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer() || !e[1].is_number_integer())
      throw Bad{};
    const auto lo = e[0].get<long long>(), hi = e[1].get<long long>();
    if (lo < first || hi > last || lo > hi) throw Bad{};
    if (!out.empty() && lo <= out.back().second) throw Bad{};  // ascending, disjoint
    out.emplace_back(static_cast<int>(lo), static_cast<int>(hi));
  }
  return out;
}

std::vector<std::string> read_hosts(const nlohmann::json& o, const char* k) {
  std::vector<std::string> out;
  for (const auto& h : array(o, k, kSummaryHosts)) out.push_back(text(h, kSummaryHostChars));
  return out;
}

}  // namespace

bool FingerprintSummary::complete() const {
  return more_fields == 0 && ranks_in(ranks) == rank_count;
}

long long ranks_in(const RankRanges& r) {
  long long n = 0;
  for (const auto& [a, b] : r) n += static_cast<long long>(b) - a + 1;
  return n;
}

RankRanges normalized(RankRanges r) {
  std::sort(r.begin(), r.end());
  RankRanges out;
  for (const auto& [a, b] : r) {
    if (!out.empty() && static_cast<long long>(out.back().second) + 1 >= a)
      out.back().second = std::max(out.back().second, b);
    else
      out.emplace_back(a, b);
  }
  return out;
}

FingerprintSummary summarize_fingerprints(const std::vector<RankPrint>& prints) {
  std::vector<RankPrint> ps;
  for (const auto& p : prints)
    if (p.print && !p.print->empty()) ps.push_back(p);
  std::sort(ps.begin(), ps.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  std::map<std::string, const Fingerprint*> host_print;  // the lowest rank's, as compared
  std::set<std::string> keys;
  std::vector<int> ranks;
  for (const auto& p : ps) {
    host_print.emplace(p.host, p.print);
    ranks.push_back(p.rank);
    for (const auto& [k, v] : p.print->fields)
      if (compared_field(k)) keys.insert(k);
  }
  FingerprintSummary s;
  s.ranks = to_ranges(ranks, kSummaryRankRanges);
  s.rank_count = static_cast<long long>(ps.size());
  std::set<std::string> all_hosts;
  for (const auto& [h, p] : host_print) all_hosts.insert(h);
  s.hosts = first_hosts(all_hosts);
  s.host_count = static_cast<long long>(all_hosts.size());
  // The fields that matter most, when there are more than a summary keeps.
  std::vector<std::string> kept(keys.begin(), keys.end());
  std::stable_sort(kept.begin(), kept.end(),
                   [](auto& a, auto& b) { return priority(a) < priority(b); });
  if (kept.size() > kSummaryFields) {
    s.more_fields = static_cast<long long>(kept.size() - kSummaryFields);
    kept.resize(kSummaryFields);
  }
  std::sort(kept.begin(), kept.end());
  for (const auto& key : kept) {
    const bool host = is_host_field(key);
    struct Holders {
      std::vector<int> ranks;
      std::set<std::string> hosts;
    };
    std::map<std::string, Holders> by_value;
    for (const auto& p : ps) {
      const Fingerprint* print = host ? host_print[p.host] : p.print;
      if (absent_is_silent(key) && !print->fields.count(key)) continue;
      const std::string v = print->get(key);
      if (v == "unknown" && unknown_is_silent(key)) continue;
      auto& h = by_value[v];
      h.ranks.push_back(p.rank);
      h.hosts.insert(p.host);
    }
    SummaryField f{key, {}, 0, 0};
    for (const auto& [v, h] : by_value)
      f.values.push_back({v, to_ranges(h.ranks, kSummaryRanges),
                          static_cast<long long>(h.ranks.size()), first_hosts(h.hosts),
                          static_cast<long long>(h.hosts.size())});
    // Too many values: the ones most ranks hold are kept, the rest counted.
    if (f.values.size() > kSummaryValues) {
      std::stable_sort(f.values.begin(), f.values.end(),
                       [](auto& a, auto& b) { return a.ranks > b.ranks; });
      for (std::size_t i = kSummaryValues; i < f.values.size(); ++i) {
        ++f.more_values;
        f.more_ranks += f.values[i].ranks;
      }
      f.values.resize(kSummaryValues);
    }
    std::sort(f.values.begin(), f.values.end(),
              [](auto& a, auto& b) { return a.ranges.front() < b.ranges.front(); });
    if (!f.values.empty()) s.fields.push_back(std::move(f));  // not all silent
  }
  return s;
}

nlohmann::json summary_json(const FingerprintSummary& s) {
  nlohmann::json j{{"ranks", ranges_json(s.ranks)},
                   {"n", s.rank_count},
                   {"hosts", s.hosts},
                   {"hn", s.host_count},
                   {"mf", s.more_fields}};
  std::vector<nlohmann::json> fields;
  std::vector<std::size_t> order, bytes;
  std::size_t total = dumped(j) + 16;
  for (const auto& f : s.fields) {
    fields.push_back(field_json(f));
    bytes.push_back(dumped(fields.back()) + 1);
    total += bytes.back();
    order.push_back(order.size());
  }
  // Over the budget: the fields that matter least go first (counted).
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return priority(s.fields[a].field) > priority(s.fields[b].field);
  });
  std::vector<bool> dropped(fields.size(), false);
  long long more = s.more_fields;
  for (std::size_t i = 0; total > kMaxSummaryBytes && i < order.size(); ++i) {
    dropped[order[i]] = true;
    total -= bytes[order[i]];
    ++more;
  }
  auto& out = j["fields"] = nlohmann::json::array();
  for (std::size_t i = 0; i < fields.size(); ++i)
    if (!dropped[i]) out.push_back(std::move(fields[i]));
  j["mf"] = more;
  return j;
}

std::optional<FingerprintSummary> decode_summary(const nlohmann::json& j, int first, int last) {
  if (!j.is_object() || first < 0 || last < first) return std::nullopt;
  const long long span = static_cast<long long>(last) - first + 1;
  try {
    FingerprintSummary s;
    s.ranks = read_ranges(array(j, "ranks", kSummaryRankRanges), first, last, kSummaryRankRanges);
    s.rank_count = count(j, "n", ranks_in(s.ranks), span);
    s.hosts = read_hosts(j, "hosts");
    s.host_count = count(j, "hn", static_cast<long long>(s.hosts.size()), s.rank_count);
    s.more_fields = count(j, "mf", 0, 1 << 20);
    for (const auto& jf : array(j, "fields", kSummaryFields)) {
      if (!jf.is_object()) throw Bad{};
      SummaryField f;
      f.field = text(jf.contains("f") ? jf["f"] : nlohmann::json(), kMaxKeyChars);
      if (!compared_field(f.field)) throw Bad{};
      if (!s.fields.empty() && f.field <= s.fields.back().field) throw Bad{};  // sorted, distinct
      f.more_values = count(jf, "mv", 0, span);
      f.more_ranks = count(jf, "mr", f.more_values, span);
      std::set<std::string> seen;
      for (const auto& jv : array(jf, "vals", kSummaryValues)) {
        if (!jv.is_object()) throw Bad{};
        SummaryValue v;
        v.value = text(jv.contains("v") ? jv["v"] : nlohmann::json(), kMaxValueChars, true);
        if (!seen.insert(v.value).second) throw Bad{};
        v.ranges = read_ranges(array(jv, "r", kSummaryRanges), first, last, kSummaryRanges);
        v.ranks = count(jv, "n", std::max<long long>(1, ranks_in(v.ranges)), span);
        v.hosts = read_hosts(jv, "h");
        v.host_count = count(jv, "hn", static_cast<long long>(v.hosts.size()), v.ranks);
        f.values.push_back(std::move(v));
      }
      if (f.values.empty()) throw Bad{};
      s.fields.push_back(std::move(f));
    }
    return s;
  } catch (const Bad&) {
    return std::nullopt;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

bool differs_within(const FingerprintSummary& s, const std::string& field) {
  for (const auto& f : s.fields)
    if (f.field == field) return f.values.size() + static_cast<std::size_t>(f.more_values) > 1;
  return false;
}

}  // namespace gpudiag
