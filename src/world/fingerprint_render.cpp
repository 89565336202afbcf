// The comparison's words (fingerprint_compare.h): ranks and hosts
// compressed into short lists, one line per difference, the bounded JSON the
// judge's review carries, and the report's block rendered back from that JSON
// (which may come from another process: anything malformed is skipped, every
// text cut short). A difference whose odd values sit on a few hosts also gets
// "drift" lines naming those hosts against the value most ranks hold
// (drift_lines), so one node on another driver or NCCL_* setting in a job of
// thousands is named, not lost in "+2047 hosts".
#include <algorithm>

#include "util/strings.h"
#include "world/fingerprint_compare.h"

namespace gpudiag {

namespace {

constexpr std::size_t kNamed = 8;   ///< differences / findings in the JSON
constexpr std::size_t kGroups = 4;  ///< groups named per difference
/// The JSON's budget inside the review (capped at 64 KiB with its other texts).
constexpr std::size_t kMaxJsonBytes = 24u << 10;
constexpr std::size_t kShownValue = 96, kShownHost = 32;
constexpr std::size_t kDrifts = 4;  ///< drift lines per difference in the JSON

std::string cut(const std::string& s, std::size_t n) {
  return s.size() > n ? s.substr(0, n) + "..." : s;
}

/// A text from the review, cut short: the review comes from another process.
std::string clip_text(const std::string& s) {
  return s.size() > 2048 ? s.substr(0, 2048) + "..." : s;
}
}  // namespace

std::string compress_ranks(const std::vector<int>& r) {
  std::string out;
  for (std::size_t i = 0; i < r.size();) {
    std::size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(r[i]);
    if (j > i) out += "-" + std::to_string(r[j]);
    i = j + 1;
    if (out.size() > 80 && i < r.size()) return out + ",...";
  }
  return out;
}

std::string compress_ranges(const std::vector<std::pair<int, int>>& r) {
  std::string out;
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (!out.empty()) out += ",";
    out += std::to_string(r[i].first);
    if (r[i].second > r[i].first) out += "-" + std::to_string(r[i].second);
    if (out.size() > 80 && i + 1 < r.size()) return out + ",...";
  }
  return out;
}

std::size_t ValueGroup::rank_count() const {
  std::size_t n = ranks.size() + more_ranks;
  for (const auto& [a, b] : ranges) n += static_cast<std::size_t>(b - a) + 1;
  return n;
}

int ValueGroup::first_rank() const {
  if (!ranks.empty()) return ranks.front();
  return ranges.empty() ? 1 << 30 : ranges.front().first;
}

std::string compress_hosts(const std::vector<std::string>& hosts, std::size_t more) {
  std::vector<std::string> named;
  for (std::size_t i = 0; i < hosts.size() && i < 3; ++i)
    named.push_back(cut(hosts[i], kShownHost));
  std::string out = join(named, ",");
  if (const auto rest = hosts.size() - named.size() + more; rest > 0)
    out += " +" + std::to_string(rest) + " hosts";
  return out;
}

namespace {

/// "0-7,9" with "..." where the group lists only some of its ranks.
std::string group_ranks(const ValueGroup& g) {
  std::string r = g.ranks.empty() ? compress_ranges(g.ranges) : compress_ranks(g.ranks);
  if (g.more_ranks > 0 && !r.ends_with("...")) r += r.empty() ? "..." : ",...";
  return r;
}

}  // namespace

std::string group_text(const std::string& field, const ValueGroup& g) {
  std::string who = (g.rank_count() == 1 ? "rank " : "ranks ") + group_ranks(g) + " [" +
                    compress_hosts(g.hosts, g.more_hosts) + "]: ";
  const std::string value = cut(g.value, kShownValue);
  if (field.starts_with("env."))
    return who + (g.value == "unset" ? "unset" : field.substr(4) + "=" + value);
  return who + value;
}

std::string difference_line(const Difference& d, std::size_t max_groups) {
  std::string s =
      field_title(d.field) + " differs between " + (d.host_field ? "hosts" : "ranks") + ": ";
  for (std::size_t i = 0; i < d.groups.size() && i < max_groups; ++i)
    s += (i ? "; " : "") + group_text(d.field, d.groups[i]);
  if (d.groups.size() > max_groups)
    s += "; (+" + std::to_string(d.groups.size() - max_groups) + " more groups)";
  return s;
}

std::vector<std::string> drift_lines(const Difference& d, std::size_t max_lines,
                                     std::size_t max_hosts) {
  std::vector<std::string> out;
  if (d.groups.size() < 2) return out;
  const ValueGroup* most = &d.groups[0];  // the value most ranks hold (the first on a tie)
  for (const auto& g : d.groups)
    if (g.rank_count() > most->rank_count()) most = &g;
  for (const auto& g : d.groups) {
    if (out.size() >= max_lines) break;
    // Only a few hosts, every one of them named: the odd ones out.
    if (&g == most || g.more_hosts > 0 || g.hosts.empty() || g.hosts.size() > max_hosts ||
        g.rank_count() >= most->rank_count())
      continue;
    std::vector<std::string> hosts;
    for (const auto& h : g.hosts) hosts.push_back(cut(h, kShownHost));
    out.push_back(join(hosts, ",") + " (" + (g.rank_count() == 1 ? "rank " : "ranks ") +
                  group_ranks(g) + "): " + field_title(d.field) + " is " +
                  cut(g.value, kShownValue) + ", not " + cut(most->value, kShownValue) + " as on " +
                  std::to_string(most->rank_count()) + " other ranks");
  }
  return out;
}

std::vector<std::string> broken_lines(const FingerprintComparison& c) {
  std::vector<std::string> out;
  for (const auto& d : c.differences)
    if (d.broken) out.push_back(difference_line(d, 2) + " (" + d.remedy + ")");
  return out;
}

nlohmann::json comparison_json(const FingerprintComparison& c) {
  nlohmann::json j;
  j["ranks_compared"] = c.ranks;
  j["hosts"] = c.hosts;
  j["fields_compared"] = c.fields;
  auto& diffs = j["differences"] = nlohmann::json::array();
  for (std::size_t i = 0; i < c.differences.size() && i < kNamed; ++i) {
    const auto& d = c.differences[i];
    nlohmann::json jd{{"field", d.field},
                      {"scope", d.host_field ? "host" : "rank"},
                      {"severity", d.broken ? "broken" : "warning"},
                      {"text", difference_line(d, kGroups)},
                      {"remedy", d.remedy},
                      {"groups", nlohmann::json::array()},
                      {"more_groups", d.groups.size() > kGroups ? d.groups.size() - kGroups : 0}};
    for (std::size_t g = 0; g < d.groups.size() && g < kGroups; ++g)
      jd["groups"].push_back(
          {{"value", cut(d.groups[g].value, kShownValue)},
           {"ranks", group_ranks(d.groups[g])},
           {"count", d.groups[g].rank_count()},
           {"hosts", compress_hosts(d.groups[g].hosts, d.groups[g].more_hosts)}});
    if (auto drift = drift_lines(d, kDrifts); !drift.empty()) jd["drift"] = std::move(drift);
    diffs.push_back(std::move(jd));
  }
  j["more_differences"] = c.differences.size() > kNamed ? c.differences.size() - kNamed : 0;
  auto& finds = j["findings"] = nlohmann::json::array();
  for (std::size_t i = 0; i < c.findings.size() && i < kNamed; ++i) {
    const auto& f = c.findings[i];
    finds.push_back({{"what", cut(f.what, 2 * kShownValue)},
                     {"ranks", compress_ranks(f.ranks)},
                     {"hosts", compress_hosts(f.hosts)},
                     {"remedy", f.remedy}});
  }
  j["more_findings"] = c.findings.size() > kNamed ? c.findings.size() - kNamed : 0;
  // Whatever the values, the review must fit: drop named entries (counted).
  while (j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size() > kMaxJsonBytes &&
         !(diffs.empty() && finds.empty())) {
    const bool from_diffs = !diffs.empty();
    auto& from = from_diffs ? diffs : finds;
    from.erase(from.size() - 1);
    auto& count = j[from_diffs ? "more_differences" : "more_findings"];
    count = count.get<std::size_t>() + 1;
  }
  return j;
}

std::string render_fingerprint(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("differences")) return "";
  auto str = [](const nlohmann::json& o, const char* k) {
    auto it = o.find(k);
    return it != o.end() && it->is_string() ? clip_text(it->get<std::string>()) : std::string();
  };
  auto num = [](const nlohmann::json& o, const char* k) -> long long {
    auto it = o.find(k);
    return it != o.end() && it->is_number_integer() ? it->get<long long>() : 0;
  };
  // How far the comparison reached in a tree of judges: across the groups
  // that sent a summary, within the others.
  const long long across = num(j, "across_groups"), within = num(j, "within_groups");
  std::string scope;
  if (across > 0 && within > 0)
    scope = " (compared across " + std::to_string(across) + " groups of nodes; " +
            std::to_string(within) + " more compared only within themselves: no summary read)";
  else if (across > 1)
    scope = " (compared across all " + std::to_string(across) + " groups of nodes)";
  else if (within > 1)
    scope = " (compared within each of " + std::to_string(within) +
            " groups of nodes; groups not compared with each other)";
  std::string out;
  const auto& diffs = j["differences"];
  const long long more = num(j, "more_differences");
  const std::size_t shown = diffs.is_array() ? std::min<std::size_t>(diffs.size(), kNamed) : 0;
  std::vector<std::string> drift;
  if (shown == 0) {
    out = "fingerprint: " + std::to_string(num(j, "fields_compared")) + " fields agree on all " +
          std::to_string(num(j, "ranks_compared")) + " ranks" + scope + "\n";
  } else {
    out = "fingerprint: " + std::to_string(shown + more) + " of " +
          std::to_string(num(j, "fields_compared")) + " fields differ between the " +
          std::to_string(num(j, "ranks_compared")) + " ranks" + scope + "\n";
    for (std::size_t i = 0; i < shown; ++i) {
      if (!diffs[i].is_object()) continue;
      out += "  " + std::string(str(diffs[i], "severity") == "broken" ? "BROKEN: " : "warning: ") +
             str(diffs[i], "text") + "\n";
      if (auto r = str(diffs[i], "remedy"); !r.empty()) out += "    remedy: " + r + "\n";
      const auto it = diffs[i].find("drift");
      for (std::size_t k = 0;
           it != diffs[i].end() && it->is_array() && k < it->size() && k < kDrifts; ++k)
        if ((*it)[k].is_string()) drift.push_back(clip_text((*it)[k].get<std::string>()));
    }
    if (more > 0) out += "  (+" + std::to_string(more) + " more differences in --json)\n";
  }
  for (const auto& line : drift) out += "drift: " + line + "\n";
  const auto& finds = j.contains("findings") ? j["findings"] : nlohmann::json();
  for (std::size_t i = 0; finds.is_array() && i < finds.size() && i < kNamed; ++i) {
    if (!finds[i].is_object()) continue;
    out += "fingerprint finding: " + str(finds[i], "what") + " (ranks " + str(finds[i], "ranks") +
           " [" + str(finds[i], "hosts") + "]); " + str(finds[i], "remedy") + "\n";
  }
  if (auto m = num(j, "more_findings"); m > 0)
    out += "fingerprint: (+" + std::to_string(m) + " more findings in --json)\n";
  return out;
}

}  // namespace gpudiag
