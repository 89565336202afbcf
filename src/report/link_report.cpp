#include "report/link_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "checks/verdict.h"
#include "util/strings.h"

namespace gpudiag {

namespace {

std::vector<LinkRank> link_ranks(const CheckResult& result) {
  std::vector<LinkRank> ranks;
  for (int r = 0; r < static_cast<int>(result.table.size()); ++r) {
    const auto& rec = result.table[r];
    ranks.push_back({r, rec ? rec->host : "?", rank_label(r, rec)});
  }
  return ranks;
}

double link_bytes(const CheckResult& result) {
  for (const auto& r : result.table)
    if (r && r->link_bytes > 0) return r->link_bytes;
  return 0;
}

std::string link_schedule(const CheckResult& result) {
  for (const auto& r : result.table)
    if (r && !r->link_schedule.empty())
      return r->link_schedule == "serial" ? "one pair at a time" : "the pairs of a round at once";
  return "?";
}

/// Three significant digits at most, in 8 columns: 312, 41.7, 2.41, 0.052.
std::string cell(double gbps) {
  char buf[32];
  std::snprintf(buf, sizeof buf,
                gbps >= 100  ? "%8.0f"
                : gbps >= 10 ? "%8.1f"
                : gbps >= 1  ? "%8.2f"
                             : "%8.3f",
                gbps);
  return buf;
}

std::string gbps_text(double gbps) {
  std::string s = cell(gbps);
  return s.substr(s.find_first_not_of(' ')) + " GB/s";
}

/// Rows labelled "  i label", columns by index; a negative value prints as
/// "-" on the diagonal and "?" elsewhere (not measured).
std::string grid(const std::vector<std::string>& labels,
                 const std::vector<std::vector<double>>& g) {
  const int n = static_cast<int>(labels.size());
  std::size_t w = 4;
  for (const auto& l : labels) w = std::max(w, l.size() + 8);
  std::string out = std::string(w, ' ');
  char buf[32];
  for (int b = 0; b < n; ++b) {
    std::snprintf(buf, sizeof buf, "%8d", b);
    out += buf;
  }
  out += "\n";
  for (int a = 0; a < n; ++a) {
    std::snprintf(buf, sizeof buf, "%4d ", a);
    std::string head = buf + labels[a];
    out += head + std::string(w > head.size() ? w - head.size() : 1, ' ');
    for (int b = 0; b < n; ++b)
      out += g[a][b] >= 0 ? cell(g[a][b]) : a == b ? "       -" : "       ?";
    out += "\n";
  }
  return out;
}

std::string matrix(const LinkVerdict& v, const std::vector<LinkRank>& ranks) {
  const int n = static_cast<int>(ranks.size());
  std::vector<std::vector<double>> g(n, std::vector<double>(n, -1));
  for (const auto& l : v.links) g[l.a][l.b] = g[l.b][l.a] = l.gbps;
  std::vector<std::string> labels;
  for (const auto& r : ranks) labels.push_back(r.host);
  return grid(labels, g);
}

/// Hosts in order of their first rank, and the median of the links between
/// each two (the diagonal: within the host).
struct HostGrid {
  std::vector<std::string> hosts;
  std::vector<std::vector<double>> median;
  std::vector<std::vector<int>> links;
};

HostGrid host_grid(const LinkVerdict& v, const std::vector<LinkRank>& ranks) {
  HostGrid h;
  std::map<std::string, int> index;
  for (const auto& r : ranks)
    if (index.emplace(r.host, static_cast<int>(h.hosts.size())).second) h.hosts.push_back(r.host);
  const std::size_t k = h.hosts.size();
  std::vector<std::vector<std::vector<double>>> seen(k, std::vector<std::vector<double>>(k));
  for (const auto& l : v.links) {
    int a = index[ranks[l.a].host], b = index[ranks[l.b].host];
    seen[a][b].push_back(l.gbps);
    if (a != b) seen[b][a].push_back(l.gbps);
  }
  h.median.assign(k, std::vector<double>(k, -1));
  h.links.assign(k, std::vector<int>(k, 0));
  for (std::size_t a = 0; a < k; ++a)
    for (std::size_t b = 0; b < k; ++b) {
      h.links[a][b] = static_cast<int>(seen[a][b].size());
      if (h.links[a][b] > 0) h.median[a][b] = median(std::move(seen[a][b]));
    }
  return h;
}

/// Beyond kMatrixMaxRanks: per rank, its slowest link and its median.
std::string per_rank(const LinkVerdict& v, const std::vector<LinkRank>& ranks) {
  std::string out;
  char buf[200];
  std::snprintf(buf, sizeof buf, "%6s  %-24s %12s  %s\n", "rank", "host", "median", "slowest link");
  out += buf;
  for (const auto& r : ranks) {
    std::vector<double> mine;
    const LinkSpeed* worst = nullptr;
    for (const auto& l : v.links) {
      if (l.a != r.rank && l.b != r.rank) continue;
      mine.push_back(l.gbps);
      if (!worst || l.gbps < worst->gbps) worst = &l;
    }
    const double med = median(std::move(mine));
    std::string slowest = worst ? gbps_text(worst->gbps) + " with rank " +
                                      std::to_string(worst->a == r.rank ? worst->b : worst->a) +
                                      (worst->slow ? " (slow)" : "")
                                : "-";
    std::snprintf(buf, sizeof buf, "%6d  %-24s %12s  %s\n", r.rank, r.host.c_str(),
                  gbps_text(med).c_str(), slowest.c_str());
    out += buf;
  }
  return out;
}

}  // namespace

LinkVerdict link_verdict(const CheckResult& result) {
  std::vector<std::vector<double>> seconds;
  for (const auto& r : result.table) seconds.push_back(r ? r->links : std::vector<double>{});
  return judge_links(link_ranks(result), seconds, link_bytes(result));
}

std::string link_table(const CheckResult& result, const LinkVerdict& v) {
  const auto ranks = link_ranks(result);
  const int n = static_cast<int>(ranks.size());
  std::set<std::string> hosts;
  for (const auto& r : ranks) hosts.insert(r.host);
  if (n < 2) return "link test: a job of one rank has no links to measure\n";
  std::string out = "link test: " + std::to_string(n) + " ranks on " +
                    std::to_string(hosts.size()) + (hosts.size() == 1 ? " host" : " hosts") +
                    ", backend " + result.me.backend + ", every pair exchanging " +
                    human_bytes(static_cast<std::uint64_t>(link_bytes(result))) +
                    " both ways at once (" + link_schedule(result) + "); GB/s each way\n";
  for (const auto& h : oversubscribed_hosts(result.table))
    out += "note: " + h + "; timings there depend on the scheduler as much as on the links\n";
  out += n <= kMatrixMaxRanks ? matrix(v, ranks) : per_rank(v, ranks);
  const auto hg = host_grid(v, ranks);
  if (hg.hosts.size() >= 2 && hg.hosts.size() <= kMatrixMaxRanks)
    out += "by host, median GB/s of the rank pairs between two hosts (diagonal: within one):\n" +
           grid(hg.hosts, hg.median);
  for (const auto& c : v.classes) {
    out += c.name + " links: " + std::to_string(c.links) + ", median " + gbps_text(c.median_gbps) +
           ", upper quartile " + gbps_text(c.reference_gbps);
    if (c.slowest)
      out += ", slowest " + gbps_text(c.slowest->gbps) + " (rank " + std::to_string(c.slowest->a) +
             " <-> rank " + std::to_string(c.slowest->b) + ")";
    out += "\n";
  }
  char frac[16];
  std::snprintf(frac, sizeof frac, "%.2g", kSlowFraction);
  bool compared = false;
  for (const auto& c : v.classes) compared = compared || c.links >= 2;
  if (!compared) {
    out += "no verdict: a class needs two links or more to compare them\n";
    return out;
  }
  if (v.slow_links == 0) {
    out += "no slow link: every link reaches " + std::string(frac) +
           "x of its class's upper quartile\n";
    return out;
  }
  out += std::to_string(v.slow_links) + " slow link" + (v.slow_links == 1 ? "" : "s") + " (below " +
         frac + "x of the class's upper quartile):\n";
  constexpr std::size_t kMaxFindings = 20;
  for (std::size_t i = 0; i < v.findings.size() && i < kMaxFindings; ++i)
    out += "  " + v.findings[i] + "\n";
  if (v.findings.size() > kMaxFindings)
    out += "  ... and " + std::to_string(v.findings.size() - kMaxFindings) + " more (see --json)\n";
  return out;
}

nlohmann::json link_json(const CheckResult& result, const LinkVerdict& v) {
  nlohmann::json j;
  j["gpudiag"] = GPUDIAG_VERSION;
  j["test"] = "links";
  j["world_size"] = result.table.size();
  j["backend"] = result.me.backend;
  j["bytes"] = link_bytes(result);
  j["schedule"] = result.me.link_schedule;
  j["oversubscribed_hosts"] = oversubscribed_hosts(result.table);
  j["slow_fraction"] = kSlowFraction;
  auto& ranks = j["ranks"] = nlohmann::json::array();
  for (const auto& r : link_ranks(result))
    ranks.push_back({{"rank", r.rank}, {"host", r.host}, {"label", r.label}});
  auto& links = j["links"] = nlohmann::json::array();
  for (const auto& l : v.links)
    links.push_back(
        {{"a", l.a}, {"b", l.b}, {"gbps", l.gbps}, {"same_host", l.same_host}, {"slow", l.slow}});
  auto& classes = j["classes"] = nlohmann::json::array();
  for (const auto& c : v.classes)
    classes.push_back({{"name", c.name},
                       {"links", c.links},
                       {"median_gbps", c.median_gbps},
                       {"upper_quartile_gbps", c.reference_gbps}});
  auto& hosts = j["host_pairs"] = nlohmann::json::array();
  const auto hg = host_grid(v, link_ranks(result));
  for (std::size_t a = 0; a < hg.hosts.size(); ++a)
    for (std::size_t b = a; b < hg.hosts.size(); ++b)
      if (hg.links[a][b] > 0)
        hosts.push_back({{"a", hg.hosts[a]},
                         {"b", hg.hosts[b]},
                         {"links", hg.links[a][b]},
                         {"median_gbps", hg.median[a][b]}});
  j["slow_links"] = v.slow_links;
  j["findings"] = v.findings;
  return j;
}

}  // namespace gpudiag
