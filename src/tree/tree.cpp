// The tree's layout arithmetic and the part codec (see tree.h).
#include "tree/tree.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "store/store_limits.h"

namespace gpudiag {

std::pair<int, int> TreeLayout::ranks_of_node(int k) const {
  return {k * per_node, std::min(world, (k + 1) * per_node) - 1};
}

namespace {
std::string span_text(long long a, long long b) {
  return a == b ? std::to_string(a) : std::to_string(a) + "-" + std::to_string(b);
}
}  // namespace

int TreeLayout::levels() const {
  if (group_nodes < 2) return 0;
  int l = 0;
  for (long long top = nodes(); top > group_nodes; top = (top + group_nodes - 1) / group_nodes) ++l;
  return l;
}

long long TreeLayout::span(int level) const {
  long long s = 1;
  for (int l = 0; l < level && s < nodes(); ++l) s *= std::max(group_nodes, 2);
  return s;
}

int TreeLayout::judges(int level) const {
  if (level == 0) return nodes();
  if (level < 0 || level > levels()) return 0;
  const long long s = span(level);
  return static_cast<int>((nodes() + s - 1) / s);
}

std::pair<int, int> TreeLayout::nodes_of(int level, int index) const {
  const long long s = span(level);
  return {static_cast<int>(index * s), static_cast<int>(std::min<long long>(nodes(), (index + 1) * s) - 1)};
}

std::pair<int, int> TreeLayout::ranks_of(int level, int index) const {
  auto [a, b] = nodes_of(level, index);
  return {ranks_of_node(a).first, ranks_of_node(b).second};
}

std::pair<int, int> TreeLayout::children_of(int level, int index) const {
  const long long first = static_cast<long long>(index) * group_nodes;
  return {static_cast<int>(first),
          static_cast<int>(std::min<long long>(judges(level - 1), first + group_nodes) - 1)};
}

std::string TreeLayout::level_name(int level) {
  if (level == 0) return "node";
  if (level == 1) return "group";
  if (level == 2) return "supergroup";
  return "level-" + std::to_string(level) + " group";
}

std::string TreeLayout::level_key(int level) {
  if (level == 0) return "node";
  if (level == 1) return "group";
  return "group" + std::to_string(level);
}

std::string TreeLayout::node_label(int k) const {
  auto [a, b] = ranks_of_node(k);
  return "node " + std::to_string(k) + " (ranks " + span_text(a, b) + ")";
}

std::string TreeLayout::label(int level, int index) const {
  if (level == 0) return node_label(index);
  std::string inner;
  if (level >= 2) {
    auto [ca, cb] = children_of(level, index);
    inner = (level - 1 == 1 ? std::string("groups") : level_name(level - 1) + "s") + " " +
            span_text(ca, cb) + ", ";
  }
  auto [na, nb] = nodes_of(level, index);
  auto [a, b] = ranks_of(level, index);
  return level_name(level) + " " + std::to_string(index) + " (" + inner + "nodes " +
         span_text(na, nb) + ", ranks " + span_text(a, b) + ")";
}

namespace {
constexpr const char* kMagic = "gpudiag-part/1 ";
}

std::string encode_part(const TreePart& p) {
  nlohmann::json j;
  j["checkpoint"] = p.checkpoint;
  j["wait_ms"] = p.wait_ms;
  j["missing"] = p.missing;
  nlohmann::json notes = nlohmann::json::object();
  std::size_t kept = 0;
  for (const auto& [r, text] : p.notes)
    if (kept++ < kMaxPartNotes) notes[std::to_string(r)] = text;
  j["notes"] = std::move(notes);
  j["aborted"] = p.aborted ? nlohmann::json(*p.aborted) : nlohmann::json(nullptr);
  j["review"] = p.review ? nlohmann::json(*p.review) : nlohmann::json(nullptr);
  j["lost"] = p.lost;
  if (p.wants_rank0) j["want0"] = true;
  const std::string head = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out = kMagic + std::to_string(head.size()) + "\n" + head + "\n";
  std::size_t size = out.size();
  for (const auto& [r, text] : p.records) size += text.size() + 24;
  out.reserve(size);
  for (const auto& [r, text] : p.records)
    out += std::to_string(r) + " " + std::to_string(text.size()) + "\n" + text;
  return out;
}

namespace {

/// "<number><end>" at `at`, bounded; advances past `end`.
std::optional<long long> field(const std::string& s, std::size_t& at, char end, long long max) {
  const auto stop = s.find(end, at);
  if (stop == std::string::npos || stop - at > 20) return std::nullopt;
  auto v = storelimits::parse_bounded(std::string_view(s).substr(at, stop - at), 0, max);
  at = stop + 1;
  return v;
}

}  // namespace

std::optional<TreePart> decode_part(const std::string& text, int first, int last) {
  const std::string magic = kMagic;
  if (text.compare(0, magic.size(), magic) != 0) return std::nullopt;
  std::size_t at = magic.size();
  auto head_len = field(text, at, '\n', static_cast<long long>(text.size()));
  if (!head_len || at + *head_len + 1 > text.size()) return std::nullopt;
  TreePart p;
  try {
    auto j = nlohmann::json::parse(text.substr(at, *head_len));
    if (auto it = j.find("checkpoint"); it != j.end() && it->is_string())
      p.checkpoint = storelimits::store_text(it->get<std::string>(), 64);
    if (auto it = j.find("wait_ms"); it != j.end() && it->is_number_integer())
      p.wait_ms = std::clamp<long long>(it->get<long long>(), 0, 7LL * 24 * 3600 * 1000);
    for (const auto& m : j.at("missing")) {
      if (!m.is_number_integer()) continue;
      const int r = m.get<int>();
      if (r >= first && r <= last && (p.missing.empty() || r > p.missing.back()))
        p.missing.push_back(r);
    }
    for (const auto& [k, v] : j.at("notes").items())
      if (auto r = storelimits::parse_bounded(k, first, last);
          r && v.is_string() && p.notes.size() < kMaxPartNotes)
        p.notes[*r] = storelimits::store_text(v.get<std::string>(), 512);
    if (j.at("aborted").is_string())
      p.aborted = storelimits::store_text(j["aborted"].get<std::string>(), 1024);
    if (j.at("review").is_string())
      p.review = j["review"].get<std::string>().substr(0, kMaxPartReview);
    for (const auto& m : j.at("lost"))
      if (m.is_number_integer() && p.lost.size() < 4096) p.lost.push_back(m.get<int>());
    if (auto it = j.find("want0"); it != j.end() && it->is_boolean()) p.wants_rank0 = *it;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  at += *head_len + 1;
  while (at < text.size()) {
    auto r = field(text, at, ' ', 1LL << 31);
    auto len = field(text, at, '\n', static_cast<long long>(text.size()));
    if (!r || !len || at + *len > text.size()) return std::nullopt;
    if (*r >= first && *r <= last) p.records[static_cast<int>(*r)] = text.substr(at, *len);
    at += *len;
  }
  // A rank is either there or missing.
  p.missing.erase(std::remove_if(p.missing.begin(), p.missing.end(),
                                 [&](int r) { return p.records.count(r) > 0; }),
                  p.missing.end());
  return p;
}

}  // namespace gpudiag
