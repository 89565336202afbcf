// The store plane's one class (store_plane.h), shared by its two files:
// store_plane.cpp (a rank's claim, announcements and the store's health) and
// store_plane_gather.cpp (a checkpoint: publishing a record, the judge, the
// digest, the tree's reads). Not for use outside them.
#pragma once

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "plane/checkpoint_digest.h"
#include "store/store_limits.h"
#include "plane/store_plane.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/strings.h"
#include "world/fingerprint_compare.h"

namespace gpudiag::store_plane_detail {

constexpr auto kSlice = std::chrono::milliseconds(200);
constexpr auto kFailurePollEvery = std::chrono::milliseconds(100);
constexpr auto kFailureGrace = std::chrono::seconds(2);
/// How long past its own deadline a rank waits for rank 0's digest: rank 0
/// decides at its deadline, and may have started the checkpoint a little later.
constexpr auto kJudgeGrace = std::chrono::seconds(5);
/// How long a request the store answers at once (anything but a GET or WAIT
/// parked until its keys exist) may go unanswered before the store is
/// suspected of having stopped: 2 s, plus 0.5 ms a rank for the busy store of
/// a large job, at most 30 s. A second request confirms it (a rank that was
/// itself stopped and resumed finds its first deadline past, not the store).
inline std::chrono::milliseconds answer_window(int size) {
  return std::chrono::milliseconds(std::min<std::int64_t>(2000 + size / 2, 30000));
}

/// Announcements a job of `size` ranks can make: each rank fails once per
/// phase at most and a duplicate claim announces once; each launcher announces
/// each of its ranks' deaths once. A larger `failures` counter was forged.
inline std::int64_t max_announcements(int size) {
  return 16 * static_cast<std::int64_t>(size) + 64;
}
/// Announcements read in one look, so a burst is read in bounded steps.
inline std::int64_t announcements_per_look(int size) {
  return 2 * static_cast<std::int64_t>(size) + 16;
}

inline std::string dead_key(int rank) { return "dead/" + std::to_string(rank); }

inline std::string key(const char* what, int r) {
  return std::string(what) + "/" + std::to_string(r);
}

class StorePlane : public Plane {
 public:
  StorePlane(std::unique_ptr<Store> store, const StorePlaneIdentity& me)
      : store_(std::move(store)),
        me_(me),
        window_(answer_window(me.size)),
        server_(me.served_by.empty() ? "the process" : me.served_by) {}

  /// Claims the rank and says who holds it.
  void claim(Deadline deadline);

  /// Says goodbye, so a store that reports ranks whose connection closes
  /// (ranks started by hand) does not take this rank's exit for a death.
  ~StorePlane() override;

  int rank() const override { return me_.rank; }
  int size() const override { return me_.size; }
  std::string describe() const override { return "the store at " + store_->address(); }

  void note_phase(const std::string& phase) override;

  void announce_failure(const std::string& why) override;

  std::optional<std::string> peer_failure() override;

  std::optional<std::string> peer_death() override {
    poll_failures();
    return death_;
  }

  Gathered gather_all(const std::string& name, const std::string& mine, Deadline deadline,
                      const std::vector<int>& wait_for, const std::vector<int>& need,
                      const Review& review) override;

  std::uint64_t bytes_moved() const override { return bytes_; }
  void set_patient(bool patient) override { patient_ = patient; }
  bool judged_by_tree() const override { return me_.tree; }
  std::optional<std::string> lost_plane() override;
  NodeRead read_on_node(const std::string& key, NodeReader who,
                        const std::function<std::string()>& read, Deadline deadline) override;

  void publish(const std::string& name, const std::string& mine, const std::vector<int>& need,
               Deadline deadline);

 private:
  /// Sets this rank's record; in a tree, first the checkpoint's name and
  /// wait (every rank of the node: its first may be the one that never
  /// comes) and the records it needs from other nodes.
  void publish_now(const std::string& prefix, const std::string& name, const std::string& mine,
                   const std::vector<int>& need);

  /// In a tree: the leader's digest, then the records this rank needs from
  /// its node's store; without a digest, only this node's records are known
  /// and every other rank is unheard of.
  void tree_gather(Gathered& g, const std::string& prefix, Deadline deadline,
                   const std::vector<int>& need);

  /// Rank 0: waits for the records, reads them all, reviews the table and
  /// publishes the digest every other rank reads.
  void judge(Gathered& g, const std::string& prefix, Deadline deadline,
             const std::vector<int>& wait_for, const Review& review);

  /// Waits for the records of `wait_for` (every rank when empty) until the
  /// deadline, a death of every straggler, or a grace after a failure; then
  /// reads every record and describes the missing ranks.
  void wait_and_read_all(Gathered& g, const std::string& prefix, Deadline deadline,
                         const std::vector<int>& wait_for);

  /// A rank other than the judge: waits for rank 0's digest a little past its
  /// own deadline (rank 0 decides at its deadline); false when it never came,
  /// or rank 0 was reported dead.
  bool read_digest(Gathered& g, const std::string& prefix, Deadline deadline);

  void set(const std::string& k, const std::string& v, Deadline d) {
    store_->set(k, v, d);
    bytes_ += k.size() + v.size();
  }

  std::vector<std::optional<std::string>> multi_get(const std::vector<std::string>& keys);

  /// Fills notes for the missing ranks from their hello/ and phase/ keys.
  void describe_missing(Gathered& g);

  /// Reads the announcements made since the last look (at most every 100 ms).
  /// The counter and the texts come from the store, which anyone who knows its
  /// address and token can write: a counter that is not a number or is beyond
  /// what this job can announce is ignored with one warning, at most a bounded
  /// number of announcements is read per look, and texts are cut to one line.
  void poll_failures();

  /// Every key in `needed` (the records of `ranks`, in order) is set, or its
  /// rank is marked dead by a launcher: nobody else is coming.
  bool only_the_dead_are_missing(const std::vector<std::string>& needed,
                                 const std::vector<int>& ranks);

  /// A store error that is not a timeout means the store is gone for good.
  void note_lost(const Error& e);

  /// Runs `call`, a request the store answers at once, with the answer window
  /// as its deadline. Unanswered, a second request confirms: when that one
  /// goes unanswered too, the store has stopped (its process stopped, hung or
  /// cut off), and the error names who serves it; lost_ keeps it, so every
  /// later call fails at once with the same line.
  template <class Call>
  auto answered(Call&& call) -> decltype(call(std::declval<Deadline>())) {
    if (lost_) throw Error(ExitCode::broken, *lost_);
    try {
      return call(Deadline::after(window_));
    } catch (const Error& e) {
      if (e.code() != ExitCode::timeout) throw;
      // The second request waits longer on a job that gave itself long: a store
      // busy with hundreds of ranks on a few cores answers late, not never.
      const auto confirm = std::max<std::chrono::milliseconds>(
          window_, std::chrono::milliseconds(static_cast<std::int64_t>(
                       std::min(me_.timeout_s, 240.0) * 1000 / 4)));
      try {
        store_->try_get("server", Deadline::after(confirm));
      } catch (const Error& probe) {
        if (probe.code() != ExitCode::timeout) throw;
        // Its process is on this host and running (this one, or another that
        // is not stopped): a busy store, not a stopped one. The checkpoint's
        // own deadline judges it.
        if (store_->server_running() == true) {
          if (!said_slow_) spdlog::warn("{}", server_ + " serving " + describe() +
                                                 " answers slowly; its process runs: waiting");
          said_slow_ = true;
          throw;
        }
        Error stopped(ExitCode::broken,
                      server_ + " serving " + describe() + " stopped answering (a request " +
                          human_seconds(std::chrono::duration<double>(window_).count()) +
                          " and another " + human_seconds(std::chrono::duration<double>(confirm).count()) +
                          " without a reply)",
                      "look at that process and its host: stopped (SIGSTOP, a debugger), "
                      "swapping, or cut off from the network");
        lost_ = stopped.one_line();
        throw stopped;
      }
      throw;  // it answers: the store is only slow
    }
  }

  std::unique_ptr<Store> store_;
  StorePlaneIdentity me_;
  std::chrono::milliseconds window_;  ///< answer_window(size)
  std::string server_;                ///< who serves the store: "rank 0 [node1]"
  int seq_ = 0;
  std::optional<std::string> failure_, death_, lost_;
  /// In a tree: this node's judge stopped (its "tree/stopped"), so no digest
  /// will come; later checkpoints end at once with this.
  std::optional<std::string> cut_off_;
  std::vector<std::int64_t> own_;  ///< numbers of this rank's own announcements
  std::int64_t seen_ = 0;          ///< announcements read so far
  bool warned_forged_ = false;     ///< the forged-counter warning was logged
  std::uint64_t bytes_ = 0;        ///< keys and values sent and read at checkpoints
  bool published_ = false;         ///< publish() set the next checkpoint's record
  long long wait_ms_ = 0;          ///< the checkpoint's wait, for a tree's leader
  bool patient_ = false;           ///< set_patient (plane.h)
  bool said_slow_ = false;         ///< the slow-store warning was logged
  std::string checkpoint_;  ///< the name of the checkpoint being gathered, for progress lines
  Deadline::Clock::time_point next_failure_poll_{};
};

}  // namespace gpudiag::store_plane_detail
