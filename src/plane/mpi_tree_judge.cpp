// The MPI tree's messages and the root's judgement (see mpi_tree_judge.h).
#include "plane/mpi_tree_judge.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <functional>
#include <set>

#include "store/store_limits.h"

namespace gpudiag {

namespace {

/// Ranks a rank, a node's bundle or a group asks for, at most.
constexpr std::size_t kMaxJudgeNeeds = 4096;

std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// Splits "<line>\n<rest>"; nullopt without the newline.
std::optional<std::pair<std::string, std::string>> first_line(const std::string& text) {
  auto nl = text.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  return std::make_pair(text.substr(0, nl), text.substr(nl + 1));
}

/// A JSON array of ranks in [0, size), at most kMaxJudgeNeeds of them.
std::vector<int> ranks_of(const nlohmann::json& a, int size) {
  std::vector<int> out;
  if (!a.is_array()) return out;
  for (const auto& v : a)
    if (v.is_number_integer() && out.size() < kMaxJudgeNeeds && v.get<long long>() >= 0 &&
        v.get<long long>() < size)
      out.push_back(v.get<int>());
  return out;
}

/// Keeps only what `part` says of the ranks `mine` holds.
void keep_only(TreePart& part, const std::function<bool(int)>& mine) {
  std::erase_if(part.records, [&](const auto& kv) { return !mine(kv.first); });
  std::erase_if(part.notes, [&](const auto& kv) { return !mine(kv.first); });
  std::erase_if(part.missing, [&](int r) { return !mine(r); });
}

}  // namespace

std::string encode_bundle(const TreePart& part, const Needs& needs) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [r, n] : needs)
    if (!n.empty()) j[std::to_string(r)] = n;
  return dump(j) + "\n" + encode_part(part);
}

std::optional<NodeBundle> decode_bundle(const std::string& text, const MpiTreeShape& s, int k) {
  if (k < 0 || k >= s.node_count()) return std::nullopt;
  auto split = first_line(text);
  if (!split) return std::nullopt;
  const auto& ranks = s.nodes[k];
  auto p = decode_part(split->second, ranks.front(), ranks.back());
  if (!p) return std::nullopt;
  auto mine = [&](int r) { return r >= 0 && r < s.size && s.node_of[r] == k; };
  keep_only(*p, mine);
  NodeBundle b;
  b.part = std::move(*p);
  try {
    const auto head = nlohmann::json::parse(split->first);
    if (head.is_object())
      for (const auto& [key, v] : head.items())
        if (auto r = storelimits::parse_bounded(key, 0, s.size - 1); r && mine(static_cast<int>(*r)))
          b.needs[static_cast<int>(*r)] = ranks_of(v, s.size);
  } catch (const std::exception&) {
    // Needs that do not parse are none: the records still count.
  }
  return b;
}

void LevelTable::add_missing(int r, const std::string& note) {
  missing.push_back(r);
  if (notes.size() < kMaxPartNotes && !note.empty()) notes[r] = note;
}

void LevelTable::add_node(const MpiTreeShape& s, int k, const NodeBundle* b) {
  const auto& ranks = s.nodes[k];
  if (!b) {
    lost.push_back(k);
    const std::string why = s.node_label(k) + ": its leader (rank " + std::to_string(ranks.front()) +
                            ") did not report";
    for (int r : ranks) add_missing(r, why);
    return;
  }
  if (checkpoint.empty()) checkpoint = b->part.checkpoint;
  for (int r : ranks) {
    if (auto it = b->part.records.find(r); it != b->part.records.end()) {
      records[r] = it->second;
      if (auto n = b->needs.find(r); n != b->needs.end()) needs[r] = n->second;
    } else if (auto note = b->part.notes.find(r); note != b->part.notes.end()) {
      add_missing(r, note->second);
    } else {
      add_missing(r, std::binary_search(b->part.missing.begin(), b->part.missing.end(), r)
                         ? ""
                         : s.node_label(k) + ": its leader passed on neither its record nor its "
                                             "absence");
    }
  }
}

void LevelTable::finish() {
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  std::sort(lost.begin(), lost.end());
}

std::string encode_group_report(const LevelTable& t, const std::string& review,
                                const MpiTreeShape& s, int g) {
  std::set<int> outside;
  for (const auto& [r, need] : t.needs)
    for (int n : need)
      if (n >= 0 && n < s.size && s.group_of_rank(n) != g && outside.size() < kMaxJudgeNeeds)
        outside.insert(n);
  nlohmann::json head;
  head["needs"] = std::vector<int>(outside.begin(), outside.end());
  TreePart p;
  p.checkpoint = t.checkpoint;
  p.missing = t.missing;
  p.notes = t.notes;
  p.review = review;
  p.lost = t.lost;
  return dump(head) + "\n" + encode_part(p);
}

std::optional<GroupReport> decode_group_report(const std::string& text, const MpiTreeShape& s,
                                               int g) {
  if (g <= 0 || g >= s.groups()) return std::nullopt;
  auto split = first_line(text);
  if (!split) return std::nullopt;
  auto [lo, hi] = s.rank_span_of_group(g);
  auto p = decode_part(split->second, lo, hi);
  if (!p) return std::nullopt;
  keep_only(*p, [&](int r) { return s.group_of_rank(r) == g; });
  auto [na, nb] = s.nodes_of_group(g);
  std::erase_if(p->lost, [&](int k) { return k < na || k > nb; });
  GroupReport out;
  out.part = std::move(*p);
  try {
    const auto head = nlohmann::json::parse(split->first);
    if (head.is_object() && head.contains("needs")) out.needs = ranks_of(head["needs"], s.size);
  } catch (const std::exception&) {
  }
  return out;
}

RootVerdict judge_root(const MpiTreeShape& s, const RootHeard& h, TreeReviewer* reviewer) {
  RootVerdict v;
  v.direct.checkpoint = h.checkpoint;
  std::vector<ChildReview> reviews;
  std::vector<int> missing;
  std::map<int, std::string> notes;
  auto note = [&](int r, const std::string& text) {
    if (notes.size() < kMaxPartNotes && !text.empty()) notes.emplace(r, text);
  };
  for (int g = 0; g < s.groups(); ++g) {
    auto [a, b] = s.nodes_of_group(g);
    auto report = g == 0 ? h.groups.end() : h.groups.find(g);
    if (report != h.groups.end()) {
      // The judge's review covers the nodes it heard; the nodes it lost and
      // that came here are judged here.
      const auto& part = report->second.part;
      std::set<int> direct;
      for (int k : part.lost)
        if (auto it = h.nodes.find(k); it != h.nodes.end()) {
          v.direct.add_node(s, k, &it->second);
          direct.insert(k);
        }
      for (int r : part.missing)
        if (!direct.count(s.node_of[r])) {
          missing.push_back(r);
          if (auto n = part.notes.find(r); n != part.notes.end()) note(r, n->second);
        }
      if (part.review) {
        auto [lo, hi] = s.rank_span_of_group(g);
        reviews.push_back({*part.review, lo, hi});
      }
      continue;
    }
    for (int k = a; k <= b; ++k) {
      if (auto it = h.nodes.find(k); it != h.nodes.end()) {
        v.direct.add_node(s, k, &it->second);
      } else if (g == 0) {
        v.direct.add_node(s, k, nullptr);
      } else {
        const std::string judge = "the judge of " + s.group_label(g);
        const std::string why =
            s.node_label(k) + (s.leader(k) == s.judge(g)
                                   ? ": its leader (rank " + std::to_string(s.leader(k)) + "), " +
                                         judge + ", did not report"
                                   : ": neither its leader (rank " + std::to_string(s.leader(k)) +
                                         ") nor " + judge + " (rank " +
                                         std::to_string(s.judge(g)) + ") reported");
        for (int r : s.nodes[k]) v.direct.add_missing(r, why);
      }
    }
  }
  v.direct.finish();
  // The table judged here: its own review, then merged with the groups'.
  if (reviewer && (!v.direct.records.empty() || reviews.empty()))
    reviews.push_back({reviewer->review(h.checkpoint, v.direct.records, v.direct.missing,
                                        v.direct.notes),
                       0, s.size - 1});
  if (reviewer) v.review = reviewer->merge(h.checkpoint, reviews);
  for (int r : v.direct.missing) missing.push_back(r);
  for (const auto& [r, text] : v.direct.notes) note(r, text);
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  v.missing = std::move(missing);
  v.notes = std::move(notes);
  return v;
}

std::string encode_down(const DownMessage& m) {
  nlohmann::json extras = nlohmann::json::object();
  if (!m.send.empty()) extras["send"] = m.send;
  TreePart p;
  p.records = m.records;
  return m.digest + "\n" + dump(extras) + "\n" + encode_part(p);
}

std::optional<DownMessage> decode_down(const std::string& text, int size) {
  auto one = first_line(text);
  if (!one) return std::nullopt;
  auto two = first_line(one->second);
  if (!two) return std::nullopt;
  auto p = decode_part(two->second, 0, size - 1);
  if (!p) return std::nullopt;
  DownMessage m;
  m.digest = std::move(one->first);
  m.records = std::move(p->records);
  try {
    const auto extras = nlohmann::json::parse(two->first);
    if (extras.is_object() && extras.contains("send")) m.send = ranks_of(extras["send"], size);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return m;
}

std::map<int, std::string> records_for(const std::map<int, std::string>& have, const Needs& needs,
                                       const std::vector<int>& who) {
  std::map<int, std::string> out;
  for (int r : who)
    if (auto it = needs.find(r); it != needs.end())
      for (int n : it->second)
        if (auto rec = have.find(n); rec != have.end()) out.emplace(n, rec->second);
  return out;
}

}  // namespace gpudiag
