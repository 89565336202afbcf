// SLURM hostlist expansion (hostlist.h): the list is split at commas outside
// brackets; each part is literal text and bracket groups, and a part with
// several groups is their product, as SLURM's hostlist.c reads
// "rack[1-2]-n[01-02]". A range keeps the width of its lower bound when that
// is zero-padded ("[08-10]" is 08,09,10). Everything is bounded: the text, the
// number of names (kMaxHosts) and a range's size, so a hostile list gets one
// error instead of an allocation the size of its numbers.
#include <cctype>
#include <charconv>
#include <set>

#include "report/hostlist.h"
#include "util/error.h"

namespace gpudiag {

namespace {

constexpr std::size_t kMaxText = 1u << 20;

[[noreturn]] void bad(const std::string& what, const std::string& why) {
  throw UsageError("the host list " + what + " " + why +
                   " (write it as SLURM does, e.g. node[001-004,017],gpu5)");
}

/// One bracket's names: "001-004,017" -> 001 002 003 004 017.
std::vector<std::string> bracket(const std::string& inner, const std::string& whole) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= inner.size()) {
    const std::size_t comma = std::min(inner.find(',', at), inner.size());
    const std::string item = inner.substr(at, comma - at);
    at = comma + 1;
    const std::size_t dash = item.find('-');
    const std::string lo = item.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    auto digits = [](const std::string& s) {
      if (s.empty() || s.size() > 18) return false;
      for (unsigned char c : s)
        if (!std::isdigit(c)) return false;
      return true;
    };
    if (!digits(lo) || !digits(hi)) bad(whole, "has '" + item + "' where a number or range goes");
    unsigned long long a = 0, b = 0;
    std::from_chars(lo.data(), lo.data() + lo.size(), a);
    std::from_chars(hi.data(), hi.data() + hi.size(), b);
    if (b < a) bad(whole, "has the range " + item + " that runs backwards");
    if (b - a >= kMaxHosts) bad(whole, "has the range " + item + " of more than " +
                                            std::to_string(kMaxHosts) + " names");
    const std::size_t width = lo.size() > 1 && lo[0] == '0' ? lo.size() : 0;
    for (unsigned long long n = a;; ++n) {
      std::string s = std::to_string(n);
      if (s.size() < width) s.insert(0, width - s.size(), '0');
      out.push_back(std::move(s));
      if (out.size() > kMaxHosts) bad(whole, "names more than " + std::to_string(kMaxHosts) + " hosts");
      if (n == b) break;
    }
    if (comma == inner.size()) break;
  }
  return out;
}

}  // namespace

std::vector<std::string> expand_slurm_hostlist(const std::string& text) {
  if (text.size() > kMaxText) bad("of " + std::to_string(text.size()) + " bytes", "is too long");
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::size_t at = 0;
  while (at < text.size()) {
    // One part: up to the next comma outside brackets.
    std::size_t end = at;
    int depth = 0;
    for (; end < text.size(); ++end) {
      const char c = text[end];
      if (c == '[' && ++depth > 1) bad("'" + text.substr(at, 40) + "'", "nests brackets");
      if (c == ']' && --depth < 0) bad("'" + text.substr(at, 40) + "'", "closes a bracket it never opened");
      if (c == ',' && depth == 0) break;
    }
    const std::string part = text.substr(at, end - at);
    at = end + 1;
    if (depth != 0) bad("'" + part.substr(0, 40) + "'", "leaves a bracket open");
    if (part.empty()) continue;
    std::vector<std::string> names{""};
    std::size_t i = 0;
    while (i < part.size()) {
      const std::size_t open = part.find('[', i);
      const std::string literal = part.substr(i, open == std::string::npos ? std::string::npos : open - i);
      for (auto& n : names) n += literal;
      if (open == std::string::npos) break;
      const std::size_t close = part.find(']', open);
      const auto inner = bracket(part.substr(open + 1, close - open - 1), "'" + part.substr(0, 40) + "'");
      if (names.size() * inner.size() > kMaxHosts)
        bad("'" + part.substr(0, 40) + "'", "names more than " + std::to_string(kMaxHosts) + " hosts");
      std::vector<std::string> product;
      product.reserve(names.size() * inner.size());
      for (const auto& n : names)
        for (const auto& s : inner) product.push_back(n + s);
      names = std::move(product);
      i = close + 1;
    }
    for (auto& n : names) {
      if (!hostlist_safe(n)) bad("'" + part.substr(0, 40) + "'", "holds a name with a space or control character");
      if (seen.insert(n).second) out.push_back(std::move(n));
      if (out.size() > kMaxHosts) bad("", "names more than " + std::to_string(kMaxHosts) + " hosts");
    }
  }
  return out;
}

}  // namespace gpudiag
