// Rank 0 in MpiTreePlane (mpi_tree_plane.h): its node's leader, group 0's
// judge and the root. It waits for its node's ranks until the deadline, for
// group 0's leaders (and those of other groups that come to it because their
// judge went silent) a grace past it, and for the other groups' judges two
// graces past it (each waits a grace for its own leaders); a node or group
// that missed a checkpoint is not waited for again until it comes back.
// Ungrouped, every node is group 0's and the check's own review judges the
// whole table, as a flat judge does; grouped, judge_root (mpi_tree_judge.h)
// reviews what came here and merges the groups' reviews. Then one digest a
// child, with the records its ranks asked for; rank 0's own asks of other
// groups' records (the report's table) go with the judges' digests and come
// back within a grace.
#include <algorithm>
#include <thread>

#include <spdlog/spdlog.h>

#include "plane/checkpoint_digest.h"
#include "plane/mpi_tree_plane.h"

namespace gpudiag::mpi_tree {

namespace {
void pause_a_moment() { std::this_thread::sleep_for(std::chrono::microseconds(200)); }
}  // namespace

Gathered MpiTreePlane::as_root(Gathered& g, NodeBundle& own, const std::vector<int>& need,
                               int seq, Deadline deadline, const Review& review) {
  RootHeard heard;
  heard.checkpoint = own.part.checkpoint;
  const int groups = grouped_ ? shape_.groups() : 1;
  auto [first0, last0] = shape_.nodes_of_group(0);
  auto nodes_pending = [&] {
    for (int k = first0 + 1; k <= last0; ++k)
      if (!heard.nodes.count(k) && !gone_.count(k)) return true;
    for (int k : direct_)
      if (!heard.nodes.count(k) && !gone_.count(k)) return true;
    return false;
  };
  auto groups_pending = [&] {
    for (int gr = 1; gr < groups; ++gr)
      if (!heard.groups.count(gr) && !gone_.count(-1 - gr)) return true;
    return false;
  };
  const Deadline nodes_by = past(deadline, 1), groups_by = past(deadline, 2);
  bool node_open = true;
  const auto bytes_before = mail_.bytes();
  int heard_messages = 0;
  std::size_t report_bytes = 0;
  for (;;) {
    int got = drain(tag(seq, kRecord),
                    [&](int from, const std::string& m) { take_member(own, from, m); });
    got += drain(tag(seq, kBundle), [&](int from, const std::string& m) {
      if (from <= 0 || from >= size_ || from != leader_of(from)) return;
      const int k = shape_.node_of[from];
      if (heard.nodes.count(k)) return;
      if (auto b = decode_bundle(m, shape_, k)) {
        heard.nodes[k] = std::move(*b);
        gone_.erase(k);
        if (shape_.group_of_node(k) != 0) direct_.insert(k);  // its judge is lost
      }
    });
    got += drain(tag(seq, kReport), [&](int from, const std::string& m) {
      if (!grouped_ || from <= 0 || from >= size_ || from != leader_of(from)) return;
      const int k = shape_.node_of[from], gr = shape_.group_of_node(k);
      if (gr == 0 || shape_.judge(gr) != from || heard.groups.count(gr)) return;
      report_bytes += m.size();
      if (auto r = decode_group_report(m, shape_, gr)) {
        heard.groups[gr] = std::move(*r);
        gone_.erase(-1 - gr);
      }
    });
    heard_messages += got;
    if (node_open && (!node_pending(own) || deadline.expired())) node_open = false;
    if (!node_open && (!nodes_pending() || nodes_by.expired()) &&
        (!groups_pending() || groups_by.expired()))
      break;
    forward_failures();
    if (!got) pause_a_moment();
  }
  spdlog::debug("rank 0 at the {} checkpoint: {} messages, {} bytes from {} members, {} leaders "
                "and {} group judges ({} bytes of reports)",
                heard.checkpoint, heard_messages, mail_.bytes() - bytes_before,
                own.part.records.size() - 1, heard.nodes.size(), heard.groups.size(),
                report_bytes);
  close_node(own);
  heard.nodes[0] = own;
  for (int k = first0 + 1; k <= last0; ++k)
    if (!heard.nodes.count(k)) gone_.insert(k);
  for (int k : direct_)
    if (!heard.nodes.count(k)) gone_.insert(k);
  for (int gr = 1; gr < groups; ++gr)
    if (!heard.groups.count(gr)) gone_.insert(-1 - gr);

  RootVerdict v = judge_root(shape_, heard, grouped_ ? reviewer_.get() : nullptr);
  const auto& have = v.direct.records;
  for (const auto& [r, rec] : have) g.records[r] = rec;
  g.missing = v.missing;
  for (const auto& [r, note] : v.notes) g.notes[r] = note;
  g.judged = true;
  // Ungrouped, rank 0 holds the whole table: the check's own review, as flat.
  g.review = grouped_ ? v.review : review ? review(g) : std::string();
  const std::string digest = encode_digest(g.missing, v.notes, std::nullopt, g.review, {});

  for (const auto& [k, b] : heard.nodes) {
    if (k == 0) continue;
    mail_.send(encode_down({digest, {}, records_for(have, b.needs, shape_.nodes[k])}),
               shape_.leader(k), tag(seq, kToLeader));
  }
  std::map<int, std::vector<int>> asked;  // group -> the ranks rank 0 asks its judge for
  for (int r : need)
    if (r >= 0 && r < size_ && !have.count(r)) {
      const int gr = grouped_ ? shape_.group_of_rank(r) : 0;
      if (heard.groups.count(gr)) asked[gr].push_back(r);
    }
  for (const auto& [gr, report] : heard.groups) {
    DownMessage down{digest, asked.count(gr) ? asked.at(gr) : std::vector<int>{}, {}};
    for (int n : report.needs)
      if (auto it = have.find(n); it != have.end()) down.records.emplace(*it);
    mail_.send(encode_down(down), shape_.judge(gr), tag(seq, kToJudge));
  }
  for (int r : shape_.nodes[0])
    if (r != 0)
      mail_.send(encode_down({digest, {}, records_for(have, own.needs, {r})}), r,
                 tag(seq, kToMember));
  take_asked(g, asked, seq);
  return g;
}

void MpiTreePlane::take_asked(Gathered& g, const std::map<int, std::vector<int>>& asked, int seq) {
  std::set<int> waiting;
  for (const auto& [gr, ranks] : asked) waiting.insert(gr);
  const Deadline until = Deadline::after(kGrace);
  while (!waiting.empty() && !until.expired()) {
    const int got = drain(tag(seq, kAsked), [&](int from, const std::string& m) {
      if (from <= 0 || from >= size_ || from != leader_of(from)) return;
      const int gr = shape_.group_of_node(shape_.node_of[from]);
      if (!waiting.count(gr) || shape_.judge(gr) != from) return;
      waiting.erase(gr);
      auto [lo, hi] = shape_.rank_span_of_group(gr);
      if (auto p = decode_part(m, lo, hi))
        for (auto& [r, rec] : p->records)
          if (shape_.group_of_rank(r) == gr) g.records[r] = std::move(rec);
    });
    forward_failures();
    if (!got) pause_a_moment();
  }
}

}  // namespace gpudiag::mpi_tree
