#include "rendezvous/store_plane.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "rendezvous/checkpoint_digest.h"
#include "rendezvous/store_limits.h"
#include "util/progress.h"
#include "util/strings.h"
#include "world/fingerprint_compare.h"
#include "util/error.h"

namespace gpudiag {

namespace {

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
std::chrono::milliseconds answer_window(int size) {
  return std::chrono::milliseconds(std::min<std::int64_t>(2000 + size / 2, 30000));
}

/// Announcements a job of `size` ranks can make: each rank fails once per
/// phase at most and a duplicate claim announces once; each launcher announces
/// each of its ranks' deaths once. A larger `failures` counter was forged.
std::int64_t max_announcements(int size) { return 16 * static_cast<std::int64_t>(size) + 64; }
/// Announcements read in one look, so a burst is read in bounded steps.
std::int64_t announcements_per_look(int size) { return 2 * static_cast<std::int64_t>(size) + 16; }

std::string dead_key(int rank) { return "dead/" + std::to_string(rank); }

std::string key(const char* what, int r) { return std::string(what) + "/" + std::to_string(r); }

class StorePlane : public Plane {
 public:
  StorePlane(std::unique_ptr<Store> store, const StorePlaneIdentity& me)
      : store_(std::move(store)),
        me_(me),
        window_(answer_window(me.size)),
        server_(me.served_by.empty() ? "the process" : me.served_by) {}

  /// Claims the rank and says who holds it.
  void claim(Deadline deadline) {
    const std::string who = "pid " + std::to_string(me_.pid) + " on " + me_.host + " (local rank " +
                            std::to_string(me_.local_rank) + ")";
    if (store_->add(key("claim", me_.rank), 1, deadline) > 1) {
      auto holder = store_->try_get(key("hello", me_.rank), deadline);
      std::string why = "duplicate RANK=" + std::to_string(me_.rank) + ": " + who + " and " +
                        (holder ? storelimits::store_text(*holder, 256) : "another process") +
                        " both claim it";
      announce_failure(why);
      throw UsageError(why, "give every process its own RANK (0.." + std::to_string(me_.size - 1) +
                                ") and check LOCAL_RANK/GROUP_RANK arithmetic");
    }
    store_->set(key("hello", me_.rank), who, deadline);
    // Who serves the store, and where, for the line that says it stopped
    // answering: gpudiag's server says so itself ("rank 0 [node1]").
    try {
      if (auto v = store_->try_get("server", Deadline::after(window_)))
        server_ = storelimits::store_text(*v, 128);
    } catch (const Error&) {
    }
  }

  /// Says goodbye, so a store that reports ranks whose connection closes
  /// (ranks started by hand) does not take this rank's exit for a death.
  ~StorePlane() override {
    if (lost_) return;
    try {
      store_->set(key("bye", me_.rank), "1", Deadline::after(std::chrono::seconds(2)));
    } catch (const Error&) {
    }
  }

  int rank() const override { return me_.rank; }
  int size() const override { return me_.size; }
  std::string describe() const override { return "the store at " + store_->address(); }

  void note_phase(const std::string& phase) override {
    if (lost_) return;
    try {
      answered([&](Deadline d) { store_->set(key("phase", me_.rank), phase, d); });
    } catch (const Error& e) {
      note_lost(e);
    }
  }

  void announce_failure(const std::string& why) override {
    if (lost_) return;
    try {
      own_.push_back(answered(
          [&](Deadline d) { return publish_failure(*store_, why, d, FailureKind::failed); }));
    } catch (const Error& e) {
      note_lost(e);
    }
  }

  std::optional<std::string> peer_failure() override {
    poll_failures();
    if (death_) return death_;
    if (failure_) return failure_;
    return lost_;
  }

  std::optional<std::string> peer_death() override {
    poll_failures();
    return death_;
  }

  Gathered gather_all(const std::string& name, const std::string& mine, Deadline deadline,
                      const std::vector<int>& wait_for, const std::vector<int>& need,
                      const Review& review) override {
    const std::string prefix = "cp/" + std::to_string(seq_++) + "/";
    checkpoint_ = name;
    wait_ms_ = std::max<long long>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline.when() -
                                                                 Deadline::Clock::now())
               .count());
    Gathered g;
    g.records.resize(me_.size);
    g.notes.resize(me_.size);
    g.records[me_.rank] = mine;
    if (lost_) {
      g.aborted = lost_;
      g.find_missing();
      return g;
    }
    try {
      // A SET is answered at once: the answer window, not the checkpoint's
      // deadline, so a store that stops now is named within seconds.
      if (!published_) publish_now(prefix, name, mine, need);
      published_ = false;
      if (me_.tree) {
        tree_gather(g, prefix, deadline, need);
      } else if (me_.rank == 0) {
        judge(g, prefix, deadline, wait_for, review);
      } else if (!read_digest(g, prefix, deadline)) {
        // The judge did not publish in time (it is missing, or late): read the
        // table as every rank did before the digest existed.
        spdlog::debug("rank {}: no digest from rank 0 at {}; reading every record", me_.rank,
                      prefix);
        wait_and_read_all(g, prefix, deadline, wait_for);
      } else if (!need.empty()) {
        std::vector<std::string> keys;
        for (int r : need) keys.push_back(prefix + std::to_string(r));
        auto values = multi_get(keys);
        for (std::size_t i = 0; i < need.size(); ++i)
          if (need[i] != me_.rank) g.records[need[i]] = std::move(values[i]);
      }
    } catch (const Error& e) {
      note_lost(e);
      g.records.assign(me_.size, std::nullopt);
      g.records[me_.rank] = mine;
      g.judged = false;
      g.review.clear();
      g.find_missing();
      // The announced failure, when there is one, is why the store went away.
      g.aborted = failure_ ? failure_ : lost_;
    }
    return g;
  }

  std::uint64_t bytes_moved() const override { return bytes_; }
  void set_patient(bool patient) override { patient_ = patient; }
  bool judged_by_tree() const override { return me_.tree; }
  std::optional<std::string> lost_plane() override {
    if (!lost_) {
      try {
        answered([&](Deadline d) { return store_->try_get("failures", d); });
      } catch (const Error& e) {
        note_lost(e);
      }
    }
    return lost_;
  }

  void publish(const std::string& name, const std::string& mine, const std::vector<int>& need,
               Deadline deadline) {
    if (lost_ || published_) return;
    wait_ms_ = std::max<long long>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline.when() -
                                                                 Deadline::Clock::now())
               .count());
    try {
      publish_now("cp/" + std::to_string(seq_) + "/", name, mine, need);
      published_ = true;
    } catch (const Error& e) {
      note_lost(e);
    }
  }

 private:
  /// Sets this rank's record; in a tree, first the checkpoint's name and
  /// wait (every rank of the node: its first may be the one that never
  /// comes) and the records it needs from other nodes.
  void publish_now(const std::string& prefix, const std::string& name, const std::string& mine,
                   const std::vector<int>& need) {
    if (me_.tree) {
      answered([&](Deadline d) { set(prefix + "name", name, d); });
      // How long this checkpoint waits for stragglers, for a leader that
      // does not know the command's --timeout (gpudiag launch).
      answered([&](Deadline d) { set(prefix + "wait", std::to_string(wait_ms_), d); });
      std::string far;
      if (static_cast<int>(need.size()) >= me_.size)
        far = "*";  // every record: the report's table, on rank 0 at the end
      else
        for (int r : need)
          if (r < me_.node_first || r > me_.node_last)
            far += (far.empty() ? "" : ",") + std::to_string(r);
      if (!far.empty())
        answered([&](Deadline d) {
          set("need/" + prefix.substr(3) + std::to_string(me_.rank), far, d);
        });
    }
    answered([&](Deadline d) { set(prefix + std::to_string(me_.rank), mine, d); });
  }

  /// In a tree: the leader's digest, then the records this rank needs from
  /// its node's store; without a digest, only this node's records are known
  /// and every other rank is unheard of.
  void tree_gather(Gathered& g, const std::string& prefix, Deadline deadline,
                   const std::vector<int>& need) {
    if (read_digest(g, prefix, Deadline::at(deadline.when() + me_.judge_grace - kJudgeGrace))) {
      // Rank 0's share from the root: its leader set it before the digest.
      if (me_.rank == 0)
        if (auto share = answered([&](Deadline d) { return store_->try_get(prefix + "judge", d); }))
          g.judge_share = std::move(*share);
      std::vector<int> want;
      for (int r : need)
        if (r != me_.rank && r >= 0 && r < me_.size && !g.records[r]) want.push_back(r);
      if (want.empty()) return;
      // In slices, so a table of 100,000 records stays within a reply's cap.
      constexpr std::size_t kSlice = 2048;
      for (std::size_t at = 0; at < want.size(); at += kSlice) {
        std::vector<std::string> keys;
        for (std::size_t i = at; i < want.size() && i < at + kSlice; ++i)
          keys.push_back(prefix + std::to_string(want[i]));
        auto values = multi_get(keys);
        for (std::size_t i = 0; i < keys.size(); ++i)
          if (!std::binary_search(g.missing.begin(), g.missing.end(), want[at + i]))
            g.records[want[at + i]] = std::move(values[i]);
      }
      return;
    }
    std::vector<std::string> keys;
    for (int r = me_.node_first; r <= me_.node_last; ++r) keys.push_back(prefix + std::to_string(r));
    auto values = multi_get(keys);
    for (int r = me_.node_first; r <= me_.node_last; ++r)
      if (r != me_.rank) g.records[r] = std::move(values[r - me_.node_first]);
    g.find_missing();
    g.aborted = "no digest from this node's leader by the deadline: the judges above it did not "
                "answer, so only this node's ranks are known";
  }

  /// Rank 0: waits for the records, reads them all, reviews the table and
  /// publishes the digest every other rank reads.
  void judge(Gathered& g, const std::string& prefix, Deadline deadline,
             const std::vector<int>& wait_for, const Review& review) {
    wait_and_read_all(g, prefix, deadline, wait_for);
    g.judged = true;
    if (review) g.review = review(g);
    if (g.review.size() > kMaxDigestReview) g.review.resize(kMaxDigestReview);
    const std::string digest = encode_digest(g);
    answered([&](Deadline d) { set(prefix + "digest", digest, d); });
  }

  /// Waits for the records of `wait_for` (every rank when empty) until the
  /// deadline, a death of every straggler, or a grace after a failure; then
  /// reads every record and describes the missing ranks.
  void wait_and_read_all(Gathered& g, const std::string& prefix, Deadline deadline,
                         const std::vector<int>& wait_for) {
    std::vector<std::string> keys, needed;
    for (int r = 0; r < me_.size; ++r) keys.push_back(prefix + std::to_string(r));
    std::vector<int> needed_ranks = wait_for;
    if (needed_ranks.empty())
      for (int r = 0; r < me_.size; ++r) needed_ranks.push_back(r);
    for (int r : needed_ranks) needed.push_back(keys[r]);
    // A failed peer usually still arrives with its record: once a failure is
    // announced, wait only a short grace for the rest, then give up.
    Deadline until = deadline;
    bool all = false;
    // Which records are still missing, said every 10 s on a terminal (progress.h).
    WaitNotice notice(
        [&] {
          std::vector<int> missing;
          try {
            auto v = multi_get(needed);
            for (std::size_t i = 0; i < v.size(); ++i)
              if (!v[i]) missing.push_back(needed_ranks[i]);
          } catch (const std::exception&) {
          }
          return (missing.empty() ? std::string("the other ranks")
                                  : "rank(s) " + compress_ranks(missing)) +
                 " at the " + checkpoint_ + " checkpoint";
        },
        until);
    while (!(all = store_->wait(needed, until.min(Deadline::after(kSlice))))) {
      notice.poll();
      if (until.expired()) break;
      if (!g.aborted && !patient_)
        if (auto f = peer_failure()) {
          g.aborted = *f;
          until = until.min(Deadline::after(kFailureGrace));
        }
      if (!death_) poll_failures();  // a death may follow the first failure announced
      if (lost_) throw Error(ExitCode::broken, *lost_);  // the store stopped answering
      if (death_ && only_the_dead_are_missing(needed, needed_ranks)) break;
    }
    if (all) g.aborted.reset();
    const std::string mine = *g.records[me_.rank];
    auto values = multi_get(keys);
    for (int r = 0; r < me_.size; ++r) g.records[r] = std::move(values[r]);
    if (!g.records[me_.rank]) g.records[me_.rank] = mine;
    g.find_missing();
    if (!g.complete()) describe_missing(g);
  }

  /// A rank other than the judge: waits for rank 0's digest a little past its
  /// own deadline (rank 0 decides at its deadline); false when it never came,
  /// or rank 0 was reported dead.
  bool read_digest(Gathered& g, const std::string& prefix, Deadline deadline) {
    const std::string key = prefix + "digest";
    const Deadline until = Deadline::at(deadline.when() + kJudgeGrace);
    WaitNotice notice([&] {
                        return std::string(me_.tree ? "the node leader's" : "rank 0's") +
                               " review of the " + checkpoint_ + " checkpoint";
                      },
                      until);
    while (!store_->wait({key}, until.min(Deadline::after(kSlice)))) {
      notice.poll();
      if (until.expired()) return false;
      poll_failures();
      if (lost_) throw Error(ExitCode::broken, *lost_);  // the store stopped answering
      if (!me_.tree && death_ && answered([&](Deadline d) { return store_->try_get(dead_key(0), d); }))
        return false;
    }
    auto text = answered([&](Deadline d) { return store_->try_get(key, d); });
    if (!text) return false;
    bytes_ += key.size() + text->size();
    return decode_digest(*text, me_.rank, me_.size, g);
  }

  void set(const std::string& k, const std::string& v, Deadline d) {
    store_->set(k, v, d);
    bytes_ += k.size() + v.size();
  }

  std::vector<std::optional<std::string>> multi_get(const std::vector<std::string>& keys) {
    auto values = answered([&](Deadline d) { return store_->multi_get(keys, d); });
    for (std::size_t i = 0; i < keys.size(); ++i)
      bytes_ += keys[i].size() + (values[i] ? values[i]->size() : 0);
    return values;
  }

  /// Fills notes for the missing ranks from their hello/ and phase/ keys.
  void describe_missing(Gathered& g) {
    std::vector<int> missing = g.missing;
    std::vector<std::string> keys;
    for (int r : missing) {
      keys.push_back(key("hello", r));
      keys.push_back(key("phase", r));
    }
    keys.push_back("duplicates");  // the server's own: ranks claimed twice
    auto v = multi_get(keys);
    const auto& twice = v.back();
    for (std::size_t i = 0; i < missing.size(); ++i) {
      const auto& hello = v[2 * i];
      const auto& phase = v[2 * i + 1];
      if (!hello)
        g.notes[missing[i]] =
            "never joined the store: not started, or cannot reach " + store_->address() +
            (twice ? "; but " + storelimits::store_text(*twice, 512) +
                         ": a duplicate RANK takes another rank's place"
                   : "");
      else
        g.notes[missing[i]] = storelimits::store_text(*hello, 256) + ", last phase: " +
                              storelimits::store_text(phase.value_or("start"), 64);
    }
  }

  /// Reads the announcements made since the last look (at most every 100 ms).
  /// The counter and the texts come from the store, which anyone who knows its
  /// address and token can write: a counter that is not a number or is beyond
  /// what this job can announce is ignored with one warning, at most a bounded
  /// number of announcements is read per look, and texts are cut to one line.
  void poll_failures() {
    if (death_ || lost_ || Deadline::Clock::now() < next_failure_poll_) return;
    next_failure_poll_ = Deadline::Clock::now() + kFailurePollEvery;
    try {
      auto text = answered([&](Deadline d) { return store_->try_get("failures", d); });
      if (!text) return;
      auto count = storelimits::parse_bounded(*text, 0, max_announcements(me_.size));
      if (!count) {
        if (!warned_forged_)
          spdlog::warn(
              "rank {}: ignoring the store's 'failures' counter '{}': not a count of "
              "announcements a job of {} ranks can make (written by a process outside "
              "this job?)",
              me_.rank, storelimits::store_text(*text, 64), me_.size);
        warned_forged_ = true;
        return;
      }
      const std::int64_t upto =
          std::min<std::int64_t>(*count, seen_ + announcements_per_look(me_.size));
      std::vector<std::string> keys;
      for (std::int64_t n = seen_ + 1; n <= upto; ++n)
        keys.push_back("failure/" + std::to_string(n));
      auto values = answered([&](Deadline d) { return store_->multi_get(keys, d); });
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (!values[i]) break;  // announced but not written yet: read it next time
        ++seen_;
        if (std::find(own_.begin(), own_.end(), seen_) != own_.end()) continue;
        auto tab = values[i]->find('\t');
        std::string kind = tab == std::string::npos ? "failed" : values[i]->substr(0, tab);
        std::string body = tab == std::string::npos ? *values[i] : values[i]->substr(tab + 1);
        std::string line = storelimits::store_text(body, 1024);
        if (kind == "died" && !death_) death_ = line;
        if (!failure_) failure_ = line;
      }
    } catch (const Error& e) {
      note_lost(e);
    }
  }

  /// Every key in `needed` (the records of `ranks`, in order) is set, or its
  /// rank is marked dead by a launcher: nobody else is coming.
  bool only_the_dead_are_missing(const std::vector<std::string>& needed,
                                 const std::vector<int>& ranks) {
    auto have = answered([&](Deadline d) { return store_->multi_get(needed, d); });
    std::vector<std::string> dead;
    for (std::size_t i = 0; i < needed.size(); ++i)
      if (!have[i]) dead.push_back(dead_key(ranks[i]));
    if (dead.empty()) return true;
    auto marked = answered([&](Deadline d) { return store_->multi_get(dead, d); });
    return std::all_of(marked.begin(), marked.end(), [](const auto& v) { return v.has_value(); });
  }

  /// A store error that is not a timeout means the store is gone for good.
  void note_lost(const Error& e) {
    if (e.code() != ExitCode::timeout && !lost_)
      // Under node leaders the store is the node's: say whose it was.
      lost_ = e.one_line() + (me_.tree && e.one_line().find(server_) == std::string::npos
                                  ? " (" + server_ + " served it)"
                                  : "");
  }

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
      try {
        store_->try_get("server", Deadline::after(window_));
      } catch (const Error& probe) {
        if (probe.code() != ExitCode::timeout) throw;
        Error stopped(ExitCode::broken,
                      server_ + " serving " + describe() + " stopped answering (two requests " +
                          human_seconds(std::chrono::duration<double>(window_).count()) +
                          " each without a reply)",
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
  std::vector<std::int64_t> own_;  ///< numbers of this rank's own announcements
  std::int64_t seen_ = 0;          ///< announcements read so far
  bool warned_forged_ = false;     ///< the forged-counter warning was logged
  std::uint64_t bytes_ = 0;        ///< keys and values sent and read at checkpoints
  bool published_ = false;         ///< publish() set the next checkpoint's record
  long long wait_ms_ = 0;          ///< the checkpoint's wait, for a tree's leader
  bool patient_ = false;           ///< set_patient (plane.h)
  std::string checkpoint_;  ///< the name of the checkpoint being gathered, for progress lines
  Deadline::Clock::time_point next_failure_poll_{};
};

}  // namespace

std::int64_t publish_failure(Store& store, const std::string& why, Deadline deadline,
                             FailureKind kind, int rank) {
  // Before the announcement, so whoever reads it finds the rank marked.
  if (kind == FailureKind::died && rank >= 0) store.set(dead_key(rank), "1", deadline);
  auto n = store.add("failures", 1, deadline);
  store.set("failure/" + std::to_string(n),
            std::string(kind == FailureKind::died ? "died" : "failed") + "\t" + why, deadline);
  return n;
}

void publish_record(Plane& store_plane, const std::string& name, const std::string& mine,
                    const std::vector<int>& need, Deadline deadline) {
  if (auto* p = dynamic_cast<StorePlane*>(&store_plane)) p->publish(name, mine, need, deadline);
}

std::unique_ptr<Plane> make_store_plane(std::unique_ptr<Store> store, const StorePlaneIdentity& me,
                                        Deadline deadline) {
  auto plane = std::make_unique<StorePlane>(std::move(store), me);
  plane->claim(deadline);
  return plane;
}

}  // namespace gpudiag
