// The control plane: how the ranks of a check agree on what happened.
//
// A check is a fixed sequence of checkpoints that every rank passes through in
// the same order, whether its own work succeeded or not. At a checkpoint each
// rank contributes a record (a JSON string) once; one place, the *judge* (rank
// 0), reads every record, runs the caller's Review over the whole table and
// publishes a digest: the missing ranks with what the plane knows of them, the
// announced abort, and the review's text, whose size does not grow with the
// job. Every other rank reads only the digest and the few records it asks for
// (`need`), so a checkpoint moves O(n) bytes, not O(n^2). That is what lets a
// live rank say "rank 3 [node2-1] never reached the all-reduce; last seen in
// communicator" instead of hanging.
//
// When the judge itself does not arrive, a rank falls back to reading every
// record (judged = false): slower, O(n) per rank, but every rank still names
// the missing ones.
//
// Implementations: SinglePlane (world size 1), MpiPlane (MPI point-to-point,
// under mpirun/srun --mpi=pmix), MpiTreePlane (the same through node leaders
// and, past GPUDIAG_TREE_GROUP_NODES nodes, group judges), StorePlane (a TCP
// rendezvous store, itself through node leaders under GPUDIAG_TREE).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "util/deadline.h"

namespace gpudiag {

class MpiSession;
class TreeReviewer;

/// One slot per rank, stored only where a slot was written: a rank of a
/// 100,000-rank job holds the few records it read, not 100,000 empty slots
/// per checkpoint. Reads of an unwritten slot give the default (T{} unless
/// assign() or set_default() gave another); writes through operator[] create
/// the slot from the default. Iterating gives every rank's value in order.
template <class T>
class RankSlots {
 public:
  std::size_t size() const { return n_; }
  void resize(std::size_t n) {
    n_ = n;
    for (auto it = slots_.begin(); it != slots_.end();)
      it = it->first >= n ? slots_.erase(it) : std::next(it);
  }
  /// n slots, every one `v` (none stored).
  void assign(std::size_t n, const T& v) {
    n_ = n;
    slots_.clear();
    default_ = v;
  }
  /// What an unwritten slot reads from now on (the written ones keep theirs).
  void set_default(const T& v) { default_ = v; }
  T& operator[](std::size_t r) { return slots_.try_emplace(r, default_).first->second; }
  const T& operator[](std::size_t r) const {
    auto it = slots_.find(r);
    return it == slots_.end() ? default_ : it->second;
  }
  /// The value at r without creating the slot.
  const T& at(std::size_t r) const { return (*this)[r]; }
  bool stored_at(std::size_t r) const { return slots_.count(r) != 0; }
  /// Back to the default at r.
  void erase(std::size_t r) { slots_.erase(r); }
  /// Slots written so far (for tests of what a rank holds).
  std::size_t stored() const { return slots_.size(); }
  /// The written slots, in no order.
  const std::unordered_map<std::size_t, T>& written() const { return slots_; }
  /// Appends a value for one more rank (a dense table built in order).
  void push_back(const T& v) { (*this)[n_++] = v; }

  class const_iterator {
   public:
    const_iterator(const RankSlots* s, std::size_t r) : s_(s), r_(r) {}
    const T& operator*() const { return (*s_)[r_]; }
    const_iterator& operator++() {
      ++r_;
      return *this;
    }
    bool operator!=(const const_iterator& o) const { return r_ != o.r_; }

   private:
    const RankSlots* s_;
    std::size_t r_;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, n_}; }
  /// Writable iteration stores every slot, as a vector would hold them.
  class iterator {
   public:
    iterator(RankSlots* s, std::size_t r) : s_(s), r_(r) {}
    T& operator*() const { return (*s_)[r_]; }
    iterator& operator++() {
      ++r_;
      return *this;
    }
    bool operator!=(const iterator& o) const { return r_ != o.r_; }

   private:
    RankSlots* s_;
    std::size_t r_;
  };
  iterator begin() { return {this, 0}; }
  iterator end() { return {this, n_}; }

 private:
  std::size_t n_ = 0;
  T default_{};
  std::unordered_map<std::size_t, T> slots_;
};

struct Gathered {
  /// Indexed by rank. On the judge, or when not `judged`: every rank's record,
  /// nullopt for a rank that did not arrive in time. Elsewhere: this rank's
  /// and those it asked for in `need` (nullopt for the rest).
  RankSlots<std::optional<std::string>> records;
  /// Ranks that did not arrive, ascending (same on every rank when judged).
  std::vector<int> missing;
  /// Ranks that did not arrive beyond those in `missing`: the judge's digest
  /// lists a bounded number of ranges (checkpoint_digest.h) and counts the rest.
  int missing_unlisted = 0;
  /// Indexed by rank, for missing ranks: what the plane knows of them
  /// ("pid 4242 on node2, last phase: all-reduce"); may be empty.
  RankSlots<std::string> notes;
  /// Set when the wait ended early: a peer announced a failure, or the plane
  /// itself was lost ("lost the store at 10.0.0.1:29500: ...").
  std::optional<std::string> aborted;
  /// The judge's Review of the whole table; empty when not judged.
  std::string review;
  /// True when the judge's digest was read (or this rank is the judge).
  bool judged = false;
  /// Under node leaders, on rank 0 only: what the tree's root left for rank 0
  /// alone beside the digest (TreeReviewer::for_judge: the sweep's round
  /// results); empty elsewhere and in a flat job.
  std::string judge_share;
  bool complete() const { return missing.empty() && missing_unlisted == 0; }
  /// Sets `missing` from `records` (for a plane that holds the whole table).
  void find_missing();
};

/// Run by the judge over the whole table (records and missing filled, notes
/// for the missing); its text goes to every rank in `Gathered::review` and
/// must stay small (it is capped at 64 KiB): name a few ranks, count the rest.
using Review = std::function<std::string(const Gathered&)>;

/// The most text Plane::read_on_node takes from another rank.
inline constexpr std::size_t kMaxNodeReadText = 16 * 1024;

/// Who reads at Plane::read_on_node: the first of the node's ranks to ask,
/// this rank (and it leaves the text for the others), or the rank that did.
enum class NodeReader { first, me, other };

/// What Plane::read_on_node returns: the text, and whether this rank read it.
struct NodeRead {
  std::string text;
  bool here = true;
};

class Plane {
 public:
  virtual ~Plane() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Contributes `mine` at checkpoint `name`; returns the digest (who is
  /// missing, the review), the records of the ranks in `need`, and on the
  /// judge (rank 0) every rank's record. Waits for the ranks in `wait_for`
  /// (every rank when empty); a rank already known to be gone is left out so
  /// later checkpoints do not wait for it again, though its record is still
  /// taken if it arrives. Never throws on a missing peer: the caller decides
  /// what that means.
  virtual Gathered gather_all(const std::string& name, const std::string& mine, Deadline deadline,
                              const std::vector<int>& wait_for = {},
                              const std::vector<int>& need = {}, const Review& review = {}) = 0;
  /// Bytes this rank sent to and read from the plane so far (for tests and
  /// the simulator; 0 when the plane does not count).
  virtual std::uint64_t bytes_moved() const { return 0; }
  /// Cheap progress note, readable by peers when this rank goes quiet.
  virtual void note_phase(const std::string& /*phase*/) {}
  /// Tells the peers this rank failed, so they stop waiting on it early.
  virtual void announce_failure(const std::string& /*why*/) {}
  /// A failure a peer or a launcher announced ("rank 3 [n2-1] failed in
  /// communicator: ..."), so waits can end early; nullopt if none known.
  virtual std::optional<std::string> peer_failure() { return std::nullopt; }
  /// A peer's death a launcher reported ("rank 2 [n1-2] (pid 42) was killed
  /// by SIGKILL ..."), which explains a lost connection best; nullopt if none.
  virtual std::optional<std::string> peer_death() { return std::nullopt; }
  /// Short name for the report: "single", "mpi", "store tcp://host:port".
  virtual std::string describe() const = 0;
  /// Patient: an announced failure or death does not cut the wait for the
  /// other ranks short (the check stops at a failure; the sweep goes on
  /// without the failed, and waits for the live ones to finish their work).
  /// The dead are still not waited for.
  virtual void set_patient(bool /*patient*/) {}
  /// Asks the control plane itself whether it still answers (a store: one
  /// request, confirmed as usual); the reason when it does not. A lost peer
  /// connection may be a peer that quit because the store stopped: this names
  /// the store instead. Only the store plane can stop on its own.
  virtual std::optional<std::string> lost_plane() { return std::nullopt; }
  /// One read shared by the ranks that would read the same thing (one node's
  /// kernel log and sysfs): under `key` (the same on each of them), the rank
  /// that `who` names runs `read` and leaves its text in the plane; the others
  /// take that text, waiting for it until `deadline` (bounded to
  /// kMaxNodeReadText). Where the text cannot come (a plane that does not
  /// share, the reader's death, the deadline, the store lost), this rank runs
  /// `read` itself: the result is the same, only read more than once.
  virtual NodeRead read_on_node(const std::string& /*key*/, NodeReader /*who*/,
                                const std::function<std::string()>& read, Deadline /*deadline*/) {
    return {read(), true};
  }
  /// Judged by a tree of node leaders (store_plane.h): the Review passed to
  /// gather_all is not run (the tree's judges review), every rank reads rank
  /// 0's record from the digest, and rank 0 gets `judge_share`.
  virtual bool judged_by_tree() const { return false; }
};

std::unique_ptr<Plane> make_single_plane();
/// MPI_COMM_WORLD of an initialised session.
std::unique_ptr<Plane> make_mpi_plane(MpiSession& session);
/// The same through node leaders (mpi_tree_plane.cpp): nodes from
/// MPI_Comm_split_type(SHARED), or blocks of `node_size` ranks when > 0; past
/// `group_nodes` nodes, groups of them under judges that review their
/// group's table with `reviewer` (checks/tree_review.h) for rank 0 to merge.
std::unique_ptr<Plane> make_mpi_tree_plane(MpiSession& session, int node_size = 0,
                                           int group_nodes = 128,
                                           std::unique_ptr<TreeReviewer> reviewer = nullptr);

}  // namespace gpudiag
