// MpiTreePlane (mpi_tree_plane.h): MpiPlane's checkpoints (mpi_plane.cpp) through node leaders
// and, past GPUDIAG_TREE_GROUP_NODES nodes, groups of them, for large jobs
// under MPI launchers (GPUDIAG_TREE, docs/rendezvous.md).
//
// At start (after MPI_Init, every rank alive) the ranks of a node find each
// other with MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) (or blocks of
// GPUDIAG_MPI_NODE_SIZE ranks) and every rank learns every rank's leader with
// one MPI_Allgather: these are the only collectives. The shape (nodes,
// groups, judges) follows from that list (mpi_tree_shape.h). At a checkpoint
// (all point-to-point, sent without blocking, received with MPI_Iprobe
// against a deadline; the messages in mpi_tree_judge.h):
//   - a rank sends its record, with the ranks whose records it needs, to its
//     leader, which waits for its node's ranks until the deadline;
//   - ungrouped, a leader sends rank 0 its node's bundle; rank 0 reviews the
//     whole table with the check's review, as a flat job's judge does;
//   - grouped, a leader sends its group's judge (the first node's leader),
//     which acknowledges at once, waits for its nodes a grace past the
//     deadline, reviews its group's table with the check's tree review and
//     sends rank 0 one report; rank 0 judges group 0 itself and merges the
//     groups' reviews (judge_root). A leader whose judge has not acknowledged
//     by the deadline (or sent no digest) sends rank 0 its bundle directly,
//     at this checkpoint and the later ones: a silent judge costs its node.
// The digest goes down the same levels, each with the records its ranks
// asked for; rank 0's own asks (the report's table at the barrier) are
// answered by each group's judge once it has the digest. Each level waits
// for the one above a grace longer than that one waits for its own. A
// failure announced travels one hop a level: each rank passes what it hears
// to its parent and children but the one it came from, whenever it polls.
#include "plane/mpi_tree_plane.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "comm/mpi.h"
#include "plane/checkpoint_digest.h"
#include "store/store_limits.h"

namespace gpudiag {
namespace mpi_tree {

namespace {
void pause() { std::this_thread::sleep_for(std::chrono::microseconds(200)); }
}  // namespace

MpiTreePlane::MpiTreePlane(MpiSession& s, int node_size, int group_nodes,
                           std::unique_ptr<TreeReviewer> rv)
    : rank_(s.rank()), size_(s.size()), reviewer_(std::move(rv)) {
  MPI_Comm node;
  if (node_size > 0)
    MPI_Comm_split(MPI_COMM_WORLD, rank_ / node_size, rank_, &node);
  else
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  int local = 0;
  MPI_Comm_size(node, &local);
  std::vector<int> members(static_cast<std::size_t>(local));
  MPI_Allgather(&rank_, 1, MPI_INT, members.data(), 1, MPI_INT, node);
  MPI_Comm_free(&node);
  leader_ = *std::min_element(members.begin(), members.end());
  std::vector<int> leaders(static_cast<std::size_t>(size_));
  MPI_Allgather(&leader_, 1, MPI_INT, leaders.data(), 1, MPI_INT, MPI_COMM_WORLD);
  auto shape = MpiTreeShape::from_leaders(leaders, group_nodes);
  grouped_ = shape.grouped();
  leader_ = shape.leader(shape.node_of[rank_]);
  if (leader_ != rank_) return;  // a rank keeps only its leader
  shape_ = std::move(shape);
  node_ = shape_.node_of[rank_];
  group_ = shape_.group_of_node(node_);
  if (rank_ == 0)
    spdlog::info("MPI checkpoints through {} node leaders{}", shape_.node_count(),
                 grouped_ ? " in " + std::to_string(shape_.groups()) + " groups of up to " +
                                std::to_string(shape_.group_nodes) +
                                " nodes (GPUDIAG_TREE_GROUP_NODES), each judged by its first "
                                "node's leader"
                          : std::string());
}

void MpiTreePlane::announce_failure(const std::string& why) {
  const std::string text = storelimits::store_text(why, 1024);
  for (int to : neighbours()) mail_.send(text, to, kTagFailure);
}

std::optional<std::string> MpiTreePlane::peer_failure() {
  forward_failures();
  return failure_;
}

Gathered MpiTreePlane::gather_all(const std::string& name, const std::string& mine,
                                  Deadline deadline, const std::vector<int>& wait_for,
                                  const std::vector<int>& need, const Review& review) {
  const int seq = seq_++ % 1000;
  Gathered g;
  g.records.resize(size_);
  g.notes.resize(size_);
  g.records[rank_] = mine;
  if (leader_ != rank_) return as_member(g, need, mine, seq, deadline);
  NodeBundle own;
  own.part.checkpoint = name;
  own.part.records[rank_] = mine;
  own.needs[rank_] = need;
  // Members known gone are not waited for (their record still counts).
  skip_.clear();
  if (!wait_for.empty())
    for (int r : shape_.nodes[node_])
      if (!std::binary_search(wait_for.begin(), wait_for.end(), r)) skip_.insert(r);
  if (rank_ == 0) return as_root(g, own, need, seq, deadline, review);
  if (judges_group()) return as_judge(g, own, seq, deadline);
  return as_leader(g, own, seq, deadline);
}

// ---- every leader: its node ----

void MpiTreePlane::take_member(NodeBundle& own, int from, const std::string& m) {
  if (from < 0 || from >= size_ || from == rank_ || leader_of(from) != rank_) return;
  if (own.part.records.count(from)) return;
  auto [need, record] = split_need(m, size_);
  own.part.records[from] = std::move(record);
  own.needs[from] = std::move(need);
}

bool MpiTreePlane::node_pending(const NodeBundle& own) const {
  for (int r : shape_.nodes[node_])
    if (!own.part.records.count(r) && !skip_.count(r)) return true;
  return false;
}

void MpiTreePlane::close_node(NodeBundle& own) {
  for (int r : shape_.nodes[node_])
    if (!own.part.records.count(r)) {
      own.part.missing.push_back(r);
      own.part.notes[r] = "did not reach its node's leader (rank " + std::to_string(rank_) + ")";
    }
}

void MpiTreePlane::collect_node(NodeBundle& own, int seq, Deadline deadline) {
  while (node_pending(own) && !deadline.expired()) {
    const bool got = drain(tag(seq, kRecord),
                           [&](int from, const std::string& m) { take_member(own, from, m); }) > 0;
    forward_failures();
    if (!got) pause();
  }
  close_node(own);
}

std::optional<std::string> MpiTreePlane::wait_for_one(int from, int t, Deadline until) {
  for (;;) {
    if (auto m = mail_.try_recv(from, t)) return m;
    if (until.expired()) return std::nullopt;
    forward_failures();
    pause();
  }
}

void MpiTreePlane::read_down(Gathered& g, const std::string& text,
                             std::optional<DownMessage> down) {
  if (!down) down = decode_down(text, size_);
  if (!down || !decode_digest(down->digest, rank_, size_, g)) {
    g.missing.clear();
    g.find_missing();
    return;
  }
  for (const auto& [r, rec] : down->records)
    if (r != rank_ && r >= 0 && r < size_) g.records[r] = rec;
}

void MpiTreePlane::pass_to_node(Gathered& g, const DownMessage& down, const NodeBundle& own,
                                int seq) {
  std::map<int, std::string> have = down.records;
  for (const auto& [r, rec] : own.part.records) have.emplace(r, rec);
  for (int r : shape_.nodes[node_])  // a late rank learns from it that it was late
    if (r != rank_)
      mail_.send(encode_down({down.digest, {}, records_for(have, own.needs, {r})}), r,
                 tag(seq, kToMember));
  read_down(g, {}, DownMessage{down.digest, {}, records_for(have, own.needs, {rank_})});
}

Gathered MpiTreePlane::unjudged(Gathered& g, const std::map<int, std::string>& known) {
  for (const auto& [r, text] : known) g.records[r] = text;
  g.find_missing();
  return g;
}

Gathered MpiTreePlane::as_member(Gathered& g, const std::vector<int>& need,
                                 const std::string& mine, int seq, Deadline deadline) {
  mail_.send(need_line(need) + "\n" + mine, leader_, tag(seq, kRecord));
  // The levels above wait a grace each past the deadline; once the leader
  // has sent nothing, one grace (it is stopped or gone: the node is lost).
  if (auto m = wait_for_one(leader_, tag(seq, kToMember),
                            past(deadline, leader_quiet_ ? 1 : grouped_ ? 5 : 3))) {
    leader_quiet_ = false;
    read_down(g, *m, std::nullopt);
  } else {
    leader_quiet_ = true;
    g.find_missing();
  }
  return g;
}

Gathered MpiTreePlane::as_leader(Gathered& g, NodeBundle& own, int seq, Deadline deadline) {
  collect_node(own, seq, deadline);
  const std::string bundle = encode_bundle(own.part, own.needs);
  int parent = grouped_ && group_ != 0 && !judge_lost_ ? shape_.judge(group_) : 0;
  mail_.send(bundle, parent, tag(seq, kBundle));
  // The judge takes a part as soon as it is in its own checkpoint: one that
  // has not by the deadline is itself missing, and rank 0 hears this node.
  const auto ack_by = Deadline::at(std::max(deadline.when(), Deadline::Clock::now() + kGrace / 5));
  if (parent != 0 && !wait_for_one(parent, tag(seq, kAck), ack_by)) {
    lose_judge("did not take this node's part by the deadline");
    parent = 0;
    mail_.send(bundle, parent, tag(seq, kBundle));
  }
  auto m = wait_for_one(parent, tag(seq, kToLeader),
                        past(deadline, parent != 0 ? 4 : grouped_ ? 3 : 2));
  auto down = m ? decode_down(*m, size_) : std::nullopt;
  if (!down) {
    if (parent != 0) lose_judge("sent no digest by the deadline");
    return unjudged(g, own.part.records);
  }
  pass_to_node(g, *down, own, seq);
  return g;
}

void MpiTreePlane::lose_judge(const std::string& why) {
  if (judge_lost_) return;
  judge_lost_ = true;
  spdlog::warn("{}: the judge of {} (rank {}) {}; reporting to rank 0 directly from now on",
               shape_.node_label(node_), shape_.group_label(group_), shape_.judge(group_), why);
}

// ---- a group's judge ----

Gathered MpiTreePlane::as_judge(Gathered& g, NodeBundle& own, int seq, Deadline deadline) {
  std::map<int, NodeBundle> nodes;
  auto [first, last] = shape_.nodes_of_group(group_);
  auto pending = [&] {
    for (int k = first; k <= last; ++k)
      if (k != node_ && !nodes.count(k) && !gone_.count(k)) return true;
    return false;
  };
  // Its own node until the deadline, the other nodes' leaders a grace more
  // (they send when their own deadline passes); each part taken at once.
  const Deadline until = past(deadline, 1);
  bool node_open = true;
  for (;;) {
    int got = drain(tag(seq, kRecord),
                    [&](int from, const std::string& m) { take_member(own, from, m); });
    got += drain(tag(seq, kBundle), [&](int from, const std::string& m) {
      if (from < 0 || from >= size_ || from != leader_of(from)) return;
      const int k = shape_.node_of[from];
      if (k == node_ || shape_.group_of_node(k) != group_ || nodes.count(k)) return;
      if (auto b = decode_bundle(m, shape_, k)) {
        nodes[k] = std::move(*b);
        gone_.erase(k);
        mail_.send("1", from, tag(seq, kAck));
      }
    });
    if (node_open && (!node_pending(own) || deadline.expired())) node_open = false;
    if (!node_open && (!pending() || until.expired())) break;
    forward_failures();
    if (!got) pause();
  }
  close_node(own);
  LevelTable table;
  table.checkpoint = own.part.checkpoint;
  for (int k = first; k <= last; ++k) {
    const NodeBundle* b = k == node_ ? &own : nodes.count(k) ? &nodes.at(k) : nullptr;
    if (!b) gone_.insert(k);
    table.add_node(shape_, k, b);
  }
  table.finish();
  const std::string review =
      reviewer_ ? reviewer_->review(table.checkpoint, table.records, table.missing, table.notes)
                : std::string();
  mail_.send(encode_group_report(table, review, shape_, group_), 0, tag(seq, kReport));
  auto m = wait_for_one(0, tag(seq, kToJudge), past(deadline, 3));
  auto down = m ? decode_down(*m, size_) : std::nullopt;
  if (!down) return unjudged(g, table.records);
  if (!down->send.empty()) {  // rank 0's asks: the report's table
    TreePart asked;
    for (int r : down->send)
      if (auto it = table.records.find(r); it != table.records.end()) asked.records.emplace(*it);
    mail_.send(encode_part(asked), 0, tag(seq, kAsked));
  }
  std::map<int, std::string> have = down->records;
  for (const auto& [r, rec] : table.records) have.emplace(r, rec);
  for (const auto& [k, b] : nodes)
    mail_.send(encode_down({down->digest, {}, records_for(have, table.needs, shape_.nodes[k])}),
               shape_.leader(k), tag(seq, kToLeader));
  pass_to_node(g, DownMessage{down->digest, {}, have}, own, seq);
  return g;
}

// ---- failures, one hop a level ----

std::vector<int> MpiTreePlane::neighbours() const {
  if (leader_ != rank_) return {leader_};
  std::vector<int> out(shape_.nodes[node_].begin() + 1, shape_.nodes[node_].end());
  if (rank_ == 0) {
    for (int k = 1; k < shape_.node_count(); ++k)
      if (shape_.group_of_node(k) == 0 || direct_.count(k) ||
          shape_.judge(shape_.group_of_node(k)) == shape_.leader(k))
        out.push_back(shape_.leader(k));
    return out;
  }
  out.push_back(grouped_ && group_ != 0 && !judges_group() && !judge_lost_ ? shape_.judge(group_)
                                                                            : 0);
  if (judges_group()) {
    auto [a, b] = shape_.nodes_of_group(group_);
    for (int k = a + 1; k <= b; ++k) out.push_back(shape_.leader(k));
  }
  return out;
}

void MpiTreePlane::forward_failures() {
  drain(kTagFailure, [&](int from, const std::string& m) {
    const std::string text = storelimits::store_text(m, 1024);
    if (!failure_) failure_ = text;
    if (forwarded_++ >= kMaxForwarded) return;
    for (int to : neighbours())
      if (to != from) mail_.send(text, to, kTagFailure);
  });
}

}  // namespace mpi_tree

std::unique_ptr<Plane> make_mpi_tree_plane(MpiSession& session, int node_size, int group_nodes,
                                           std::unique_ptr<TreeReviewer> reviewer) {
  return std::make_unique<mpi_tree::MpiTreePlane>(session, node_size, group_nodes,
                                                  std::move(reviewer));
}

}  // namespace gpudiag
