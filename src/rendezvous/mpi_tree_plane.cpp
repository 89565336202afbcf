// MpiTreePlane: MpiPlane's checkpoints (mpi_plane.cpp) through node leaders,
// for large jobs under MPI launchers (GPUDIAG_TREE, docs/rendezvous.md).
//
// At start (after MPI_Init, every rank alive) the ranks of a node find each
// other with MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) (or, for tests and
// hosts that are not one node each, blocks of GPUDIAG_MPI_NODE_SIZE ranks);
// the lowest world rank of each is its leader, and rank 0 (a leader) learns
// every rank's leader with one MPI_Gather. These are the only collectives.
// At a checkpoint a rank sends its record (prefixed by the ranks whose records
// it needs, as in MpiPlane) to its leader; a leader waits for its node's
// ranks until the deadline and sends rank 0 one bundle (a tree part,
// tree.h: the records, the missing ranks, and the needs); rank 0 waits for
// the leaders a grace past the deadline, names the ranks of a leader that
// never reported ("node of rank 8 (ranks 8-15): its leader did not report"),
// reviews the whole table and sends each leader one digest with the records
// its ranks asked for; the leader hands each of its ranks its own. Rank 0
// receives n/8 messages a checkpoint instead of n. All messages are sent
// without blocking, received with MPI_Iprobe against the deadline.
#include <mpi.h>

#include <algorithm>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>

#include "comm/mpi.h"
#include "rendezvous/mpi_mail.h"
#include "rendezvous/plane.h"
#include "rendezvous/store_limits.h"
#include "rendezvous/tree.h"

namespace gpudiag {

namespace {

constexpr int kTagFailure = 6999;
constexpr int kTagBase = 17000;  // apart from MpiPlane's
constexpr auto kGrace = std::chrono::seconds(5);

void pause() { std::this_thread::sleep_for(std::chrono::microseconds(200)); }

class MpiTreePlane : public Plane {
 public:
  MpiTreePlane(MpiSession& s, int node_size) : rank_(s.rank()), size_(s.size()) {
    MPI_Comm node;
    if (node_size > 0)
      MPI_Comm_split(MPI_COMM_WORLD, rank_ / node_size, rank_, &node);
    else
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
    int local = 0;
    MPI_Comm_size(node, &local);
    members_.resize(static_cast<std::size_t>(local));
    MPI_Allgather(&rank_, 1, MPI_INT, members_.data(), 1, MPI_INT, node);
    MPI_Comm_free(&node);
    std::sort(members_.begin(), members_.end());
    leader_ = members_.front();
    std::vector<int> leaders(rank_ == 0 ? size_ : 0);
    MPI_Gather(&leader_, 1, MPI_INT, leaders.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int r = 0; r < static_cast<int>(leaders.size()); ++r) nodes_[leaders[r]].push_back(r);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return "MPI through node leaders"; }
  std::uint64_t bytes_moved() const override { return mail_.bytes(); }

  void announce_failure(const std::string& why) override {
    for (int r = 0; r < size_; ++r)
      if (r != rank_) send(why, r, kTagFailure);
  }
  std::optional<std::string> peer_failure() override {
    if (!failure_)
      if (auto m = mail_.try_recv(MPI_ANY_SOURCE, kTagFailure, false)) failure_ = std::move(m);
    return failure_;
  }

  Gathered gather_all(const std::string& name, const std::string& mine, Deadline deadline,
                      const std::vector<int>&, const std::vector<int>& need,
                      const Review& review) override {
    const int tag = kTagBase + 2 * (seq_++ % 1000);  // tag: up; tag + 1: down
    Gathered g;
    g.records.resize(size_);
    g.notes.resize(size_);
    g.records[rank_] = mine;
    if (leader_ != rank_) return as_member(g, need, mine, tag, deadline);
    // A leader: its node's records and needs first.
    TreePart part;
    part.checkpoint = name;
    std::map<int, std::vector<int>> needs{{rank_, need}};
    collect_node(part, needs, mine, tag, deadline);
    if (rank_ == 0) return as_root(g, part, needs, tag, deadline, review);
    return as_leader(g, part, needs, tag, deadline);
  }

 private:
  void collect_node(TreePart& part, std::map<int, std::vector<int>>& needs, const std::string& mine,
                    int tag, Deadline deadline) {
    part.records[rank_] = mine;
    auto pending = [&] {
      for (int r : members_)
        if (!part.records.count(r)) return true;
      return false;
    };
    while (pending() && !deadline.expired()) {
      bool got = false;
      for (int r : members_) {
        if (part.records.count(r)) continue;
        if (auto m = mail_.try_recv(r, tag)) {
          auto [need, record] = split_need(*m, size_);
          part.records[r] = std::move(record);
          needs[r] = std::move(need);
          got = true;
        }
      }
      if (!got) pause();
    }
    for (int r : members_)
      if (!part.records.count(r)) {
        part.missing.push_back(r);
        part.notes[r] = "did not reach its node's leader (rank " + std::to_string(rank_) + ")";
      }
  }

  /// A leader's bundle: the needs on a line ({"5":[0,7]}), then the part.
  std::string bundle(const TreePart& part, const std::map<int, std::vector<int>>& needs) const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [r, n] : needs)
      if (!n.empty()) j[std::to_string(r)] = n;
    return j.dump() + "\n" + encode_part(part);
  }

  Gathered as_leader(Gathered& g, const TreePart& part, const std::map<int, std::vector<int>>& needs,
                     int tag, Deadline deadline) {
    send(bundle(part, needs), 0, tag);
    // Rank 0 decides a grace after the deadline.
    auto until = Deadline::at(deadline.when() + 2 * kGrace);
    std::optional<std::string> digest;
    while (!(digest = mail_.try_recv(0, tag + 1)) && !until.expired()) pause();
    for (int r : members_)
      if (r != rank_) {
        if (digest) send(for_member(*digest, needs.count(r) ? needs.at(r) : std::vector<int>{}), r,
                         tag + 1);
      }
    if (digest) {
      read_digest(g, for_member(*digest, needs.at(rank_)));
    } else {
      // Rank 0 never answered: this node is all we know.
      for (const auto& [r, text] : part.records) g.records[r] = text;
      g.find_missing();
    }
    return g;
  }

  Gathered as_member(Gathered& g, const std::vector<int>& need, const std::string& mine, int tag,
                     Deadline deadline) {
    send(need_line(need) + "\n" + mine, leader_, tag);
    auto until = Deadline::at(deadline.when() + 3 * kGrace);
    while (!until.expired()) {
      if (auto m = mail_.try_recv(leader_, tag + 1)) {
        read_digest(g, *m);
        return g;
      }
      pause();
    }
    g.find_missing();
    return g;
  }

  Gathered as_root(Gathered& g, TreePart& own, std::map<int, std::vector<int>>& needs, int tag,
                   Deadline deadline, const Review& review) {
    std::map<int, TreePart> parts{{0, own}};
    auto until = Deadline::at(deadline.when() + kGrace);
    auto pending = [&] {
      for (const auto& [l, ranks] : nodes_)
        if (!parts.count(l) && !gone_.count(l)) return true;
      return false;
    };
    while (pending() && !until.expired()) {
      bool got = false;
      for (const auto& [l, ranks] : nodes_) {
        if (parts.count(l)) continue;
        if (auto m = mail_.try_recv(l, tag)) {
          got = true;
          auto nl = m->find('\n');
          auto p = nl == std::string::npos
                       ? std::nullopt
                       : decode_part(m->substr(nl + 1), 0, size_ - 1);
          if (!p) continue;
          parts[l] = std::move(*p);
          gone_.erase(l);
          try {
            const auto head = nlohmann::json::parse(m->substr(0, nl));
            for (const auto& [k, v] : head.items()) {
              auto r = storelimits::parse_bounded(k, 0, size_ - 1);
              if (r && v.is_array()) needs[static_cast<int>(*r)] = v.get<std::vector<int>>();
            }
          } catch (const std::exception&) {
          }
        }
      }
      if (!got) pause();
    }
    // The whole table: each leader speaks for its own node's ranks only.
    for (const auto& [l, ranks] : nodes_) {
      auto it = parts.find(l);
      for (int r : ranks) {
        if (it != parts.end() && it->second.records.count(r)) {
          g.records[r] = it->second.records.at(r);
        } else if (it != parts.end() && it->second.notes.count(r)) {
          g.notes[r] = it->second.notes.at(r);
        } else if (it == parts.end()) {
          g.notes[r] = "its node's leader (rank " + std::to_string(l) + ", ranks " +
                       std::to_string(ranks.front()) + "-" + std::to_string(ranks.back()) +
                       ") did not report";
        }
      }
      if (it == parts.end()) gone_.insert(l);
    }
    g.records[0] = own.records[0];
    g.find_missing();
    g.judged = true;
    if (review) g.review = review(g);
    nlohmann::json base;
    base["missing"] = g.missing;
    base["review"] = g.review;
    nlohmann::json notes = nlohmann::json::object();
    for (std::size_t i = 0; i < g.missing.size() && i < 64; ++i)
      notes[std::to_string(g.missing[i])] = g.notes.at(g.missing[i]);
    base["notes"] = std::move(notes);
    for (const auto& [l, ranks] : nodes_) {
      nlohmann::json d = base;
      nlohmann::json records = nlohmann::json::object();
      for (int r : ranks)
        if (auto it = needs.find(r); it != needs.end())
          for (int n : it->second)
            if (n >= 0 && n < size_ && g.records.at(n)) records[std::to_string(n)] = *g.records.at(n);
      d["records"] = std::move(records);
      const std::string text = d.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      if (l != 0) {
        send(text, l, tag + 1);
      } else {
        for (int r : ranks)
          if (r != 0) send(for_member(text, needs.count(r) ? needs.at(r) : std::vector<int>{}), r,
                           tag + 1);
      }
    }
    return g;
  }

  /// The digest a leader hands one of its ranks: the records it asked for.
  std::string for_member(const std::string& digest, const std::vector<int>& need) const {
    try {
      auto j = nlohmann::json::parse(digest);
      nlohmann::json mine = nlohmann::json::object();
      for (int n : need)
        if (auto it = j["records"].find(std::to_string(n)); it != j["records"].end())
          mine[std::to_string(n)] = *it;
      j["records"] = std::move(mine);
      return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } catch (const std::exception&) {
      return digest;
    }
  }

  void read_digest(Gathered& g, const std::string& text) {
    try {
      auto j = nlohmann::json::parse(text);
      const std::string review = j.at("review").get<std::string>();
      for (const auto& m : j.at("missing"))
        if (m.is_number_integer() && m.get<int>() >= 0 && m.get<int>() < size_ &&
            m.get<int>() != rank_)
          g.missing.push_back(m.get<int>());
      std::sort(g.missing.begin(), g.missing.end());
      if (auto it = j.find("notes"); it != j.end() && it->is_object())
        for (const auto& [k, v] : it->items())
          if (auto r = storelimits::parse_bounded(k, 0, size_ - 1); r && v.is_string())
            g.notes[*r] = storelimits::store_text(v.get<std::string>(), 512);
      for (const auto& [k, v] : j.at("records").items())
        if (auto r = storelimits::parse_bounded(k, 0, size_ - 1); r && *r != rank_ && v.is_string())
          g.records[*r] = v.get<std::string>();
      g.review = review;
      g.judged = true;
    } catch (const std::exception&) {
      g.missing.clear();
      g.find_missing();
    }
  }

  void send(const std::string& bytes, int dest, int tag) { mail_.send(bytes, dest, tag); }

  int rank_, size_, leader_ = 0;
  std::vector<int> members_;             ///< this node's world ranks (a leader's)
  std::map<int, std::vector<int>> nodes_;  ///< rank 0: leader -> its node's ranks
  std::set<int> gone_;                   ///< rank 0: leaders that missed a checkpoint
  int seq_ = 0;
  std::optional<std::string> failure_;
  MpiMail mail_;
};

}  // namespace

std::unique_ptr<Plane> make_mpi_tree_plane(MpiSession& session, int node_size) {
  return std::make_unique<MpiTreePlane>(session, node_size);
}

}  // namespace gpudiag
