#include "checks/links.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace gpudiag {

int link_rounds(int n) { return n < 2 ? 0 : (n % 2 == 0 ? n - 1 : n); }

int link_partner(int rank, int round, int n) {
  if (n < 2 || rank < 0 || rank >= n) return -1;
  // Circle method on m = n rounded up to even: rank m-1 stays put, the others
  // rotate; in round k, r meets (2k - r) mod (m-1), or m-1 when that is r.
  const int m = n % 2 == 0 ? n : n + 1, mod = m - 1;
  int p;
  if (rank == m - 1) {
    p = round % mod;
  } else {
    p = ((2 * round - rank) % mod + mod) % mod;
    if (p == rank) p = m - 1;
  }
  return p < n ? p : -1;  // m-1 == n is the resting seat of an odd world
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t k = v.size();
  return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

namespace {

/// Nearest-rank upper quartile.
double upper_quartile(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto idx = static_cast<std::size_t>(std::ceil(0.75 * static_cast<double>(v.size()))) - 1;
  return v[std::min(idx, v.size() - 1)];
}

std::string gbps(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f GB/s" : v >= 1 ? "%.2f GB/s" : "%.3f GB/s", v);
  return buf;
}

std::string fraction(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", whole > 0 ? part / whole : 0);
  return buf;
}

struct Judge {
  const std::vector<LinkRank>& ranks;
  LinkVerdict v;
  std::set<std::pair<int, int>> explained;

  const LinkClass* class_of(const LinkSpeed& l) const {
    const char* name = l.same_host ? "same-host" : "cross-host";
    for (const auto& c : v.classes)
      if (c.name == name) return &c;
    return nullptr;
  }

  std::vector<const LinkSpeed*> links_where(bool same_host, auto pred) const {
    std::vector<const LinkSpeed*> out;
    for (const auto& l : v.links)
      if (l.same_host == same_host && pred(l)) out.push_back(&l);
    return out;
  }

  /// Every link touching the members (a host's ranks, or one rank) within a
  /// class is slow, while the class has fast links too.
  bool all_slow(const std::vector<const LinkSpeed*>& touching, const LinkClass& c) const {
    if (touching.empty()) return false;
    int slow = 0;
    for (auto* l : touching) slow += l->slow;
    return slow == static_cast<int>(touching.size()) && c.slow < c.links;
  }

  static double median_of(const std::vector<const LinkSpeed*>& ls) {
    std::vector<double> g;
    for (auto* l : ls) g.push_back(l->gbps);
    return median(g);
  }

  void blame_hosts() {
    const LinkClass* cross = nullptr;
    for (const auto& c : v.classes)
      if (c.name == "cross-host") cross = &c;
    if (!cross) return;
    std::set<std::string> hosts;
    for (const auto& r : ranks) hosts.insert(r.host);
    if (hosts.size() < 3) return;  // with two hosts, every cross link touches both
    for (const auto& h : hosts) {
      auto touching = links_where(
          false, [&](const LinkSpeed& l) { return ranks[l.a].host == h || ranks[l.b].host == h; });
      if (!all_slow(touching, *cross)) continue;
      for (auto* l : touching) explained.insert({l->a, l->b});
      v.findings.push_back("host " + h + ": all " + std::to_string(touching.size()) +
                           " links to other hosts are slow (median " + gbps(median_of(touching)) +
                           ", cross-host links reach " + gbps(cross->reference_gbps) +
                           "): suspect its NIC, cable or switch port");
    }
  }

  void blame_ranks() {
    for (const auto& c : v.classes) {
      const bool same = c.name == "same-host";
      for (const auto& r : ranks) {
        auto touching = links_where(same, [&](const LinkSpeed& l) {
          return (l.a == r.rank || l.b == r.rank) && !explained.count({l.a, l.b});
        });
        if (touching.size() < 2 || !all_slow(touching, c)) continue;
        for (auto* l : touching) explained.insert({l->a, l->b});
        v.findings.push_back(
            r.label + ": all " + std::to_string(touching.size()) + " " + c.name +
            " links are slow (median " + gbps(median_of(touching)) + ", " + c.name +
            " links reach " + gbps(c.reference_gbps) + "): " +
            (same ? "suspect its GPU's PCIe or NVLink path (nvidia-smi topo -m, nvidia-smi "
                    "nvlink --status)"
                  : "suspect its NIC or the NIC's PCIe path (nvidia-smi topo -m, ibstat)"));
      }
    }
  }

  void list_other_slow_links() {
    for (const auto& l : v.links) {
      if (!l.slow || explained.count({l.a, l.b})) continue;
      const LinkClass* c = class_of(l);
      v.findings.push_back("slow link " + ranks[l.a].label + " <-> " + ranks[l.b].label + ": " +
                           gbps(l.gbps) + " where " + c->name + " links reach " +
                           gbps(c->reference_gbps) + " (" + fraction(l.gbps, c->reference_gbps) +
                           ")");
    }
  }
};

}  // namespace

LinkVerdict judge_links(const std::vector<LinkRank>& ranks,
                        const std::vector<std::vector<double>>& seconds, double bytes) {
  Judge j{ranks, {}, {}};
  const int n = static_cast<int>(ranks.size());
  auto at = [&](int a, int b) {
    return a < static_cast<int>(seconds.size()) && b < static_cast<int>(seconds[a].size())
               ? seconds[a][b]
               : 0.0;
  };
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) {
      double ta = at(a, b), tb = at(b, a);
      double t = ta > 0 && tb > 0 ? std::min(ta, tb) : std::max(ta, tb);
      if (t <= 0) continue;
      j.v.links.push_back({a, b, bytes / t / 1e9, ranks[a].host == ranks[b].host, false});
    }
  for (bool same : {true, false}) {
    std::vector<double> g;
    for (const auto& l : j.v.links)
      if (l.same_host == same) g.push_back(l.gbps);
    if (g.empty()) continue;
    LinkClass c{same ? "same-host" : "cross-host",
                static_cast<int>(g.size()),
                0,
                median(g),
                upper_quartile(g),
                std::nullopt};
    for (auto& l : j.v.links) {
      if (l.same_host != same) continue;
      l.slow = l.gbps < kSlowFraction * c.reference_gbps;
      c.slow += l.slow;
      j.v.slow_links += l.slow;
      if (!c.slowest || l.gbps < c.slowest->gbps) c.slowest = l;
    }
    j.v.classes.push_back(c);
  }
  j.blame_hosts();
  j.blame_ranks();
  j.list_other_slow_links();
  return std::move(j.v);
}

}  // namespace gpudiag
