// SLURM hostlist compression (hostlist.h): split each name into a prefix and
// a trailing run of digits, group by prefix and padding (zero-padded numbers
// by their width, unpadded ones together), sort each group's numbers and join
// consecutive ones into ranges.
#include "report/hostlist.h"

#include <cctype>
#include <map>
#include <set>

namespace gpudiag {

bool hostlist_safe(const std::string& host) {
  if (host.empty()) return false;
  for (unsigned char c : host)
    if (c <= ' ' || c == 0x7f || c == ',' || c == '[' || c == ']') return false;
  return true;
}

std::string slurm_hostlist(const std::vector<std::string>& hosts) {
  struct Group {
    std::string prefix;
    std::size_t width = 0;
    std::set<unsigned long long> numbers;
  };
  std::vector<Group> groups;
  std::map<std::pair<std::string, std::size_t>, std::size_t> index;
  std::vector<std::string> plain;
  std::set<std::string> seen;
  std::vector<std::pair<bool, std::size_t>> order;  // (group?, index) in first-seen order
  for (const auto& h : hosts) {
    if (!seen.insert(h).second) continue;
    std::size_t digits = 0;
    while (digits < h.size() && std::isdigit(static_cast<unsigned char>(h[h.size() - 1 - digits])))
      ++digits;
    // No trailing number, or one too long for a 64-bit range: kept as written.
    if (digits == 0 || digits > 18) {
      order.push_back({false, plain.size()});
      plain.push_back(h);
      continue;
    }
    const std::string prefix = h.substr(0, h.size() - digits);
    // Zero-padded numbers group by their width; unpadded ones together
    // whatever their length ("n9,n10" is "n[9-10]"), as SLURM writes them.
    const bool padded = digits > 1 && h[h.size() - digits] == '0';
    const std::size_t width = padded ? digits : 0;
    auto [it, fresh] = index.try_emplace({prefix, width}, groups.size());
    if (fresh) {
      groups.push_back({prefix, width, {}});
      order.push_back({true, it->second});
    }
    groups[it->second].numbers.insert(std::stoull(h.substr(h.size() - digits)));
  }
  auto padded = [](unsigned long long v, std::size_t width) {
    std::string s = std::to_string(v);
    return std::string(width > s.size() ? width - s.size() : 0, '0') + s;
  };
  std::string out;
  for (const auto& [is_group, i] : order) {
    if (!out.empty()) out += ',';
    if (!is_group) {
      out += plain[i];
      continue;
    }
    const Group& g = groups[i];
    if (g.numbers.size() == 1) {
      out += g.prefix + padded(*g.numbers.begin(), g.width);
      continue;
    }
    std::string ranges;
    for (auto it = g.numbers.begin(); it != g.numbers.end();) {
      unsigned long long lo = *it, hi = lo;
      for (++it; it != g.numbers.end() && *it == hi + 1; ++it) hi = *it;
      if (!ranges.empty()) ranges += ',';
      ranges += padded(lo, g.width);
      if (hi != lo) ranges += "-" + padded(hi, g.width);
    }
    out += g.prefix + "[" + ranges + "]";
  }
  return out;
}

}  // namespace gpudiag
