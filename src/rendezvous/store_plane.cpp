#include "rendezvous/store_plane.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "rendezvous/store_limits.h"
#include "util/error.h"

namespace gpudiag {

namespace {

constexpr auto kSlice = std::chrono::milliseconds(200);
constexpr auto kFailurePollEvery = std::chrono::milliseconds(100);
constexpr auto kFailureGrace = std::chrono::seconds(2);

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
      : store_(std::move(store)), me_(me) {}

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
  }

  int rank() const override { return me_.rank; }
  int size() const override { return me_.size; }
  std::string describe() const override { return "the store at " + store_->address(); }

  void note_phase(const std::string& phase) override {
    if (lost_) return;
    try {
      store_->set(key("phase", me_.rank), phase, Deadline::after(std::chrono::seconds(5)));
    } catch (const Error& e) {
      note_lost(e);
    }
  }

  void announce_failure(const std::string& why) override {
    if (lost_) return;
    try {
      own_.push_back(publish_failure(*store_, why, Deadline::after(std::chrono::seconds(5)),
                                     FailureKind::failed));
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

  Gathered gather_all(const std::string&, const std::string& mine, Deadline deadline,
                      const std::vector<int>& wait_for) override {
    const std::string prefix = "cp/" + std::to_string(seq_++) + "/";
    std::vector<std::string> keys, needed;
    for (int r = 0; r < me_.size; ++r) keys.push_back(prefix + std::to_string(r));
    std::vector<int> needed_ranks = wait_for;
    if (needed_ranks.empty())
      for (int r = 0; r < me_.size; ++r) needed_ranks.push_back(r);
    for (int r : needed_ranks) needed.push_back(keys[r]);
    Gathered g;
    g.records.resize(me_.size);
    g.notes.resize(me_.size);
    g.records[me_.rank] = mine;
    if (lost_) {
      g.aborted = lost_;
      return g;
    }
    try {
      store_->set(keys[me_.rank], mine, deadline);
      // A failed peer usually still arrives with its record: once a failure is
      // announced, wait only a short grace for the rest, then give up.
      Deadline until = deadline;
      bool all = false;
      while (!(all = store_->wait(needed, until.min(Deadline::after(kSlice))))) {
        if (until.expired()) break;
        if (!g.aborted)
          if (auto f = peer_failure()) {
            g.aborted = *f;
            until = until.min(Deadline::after(kFailureGrace));
          }
        if (!death_) poll_failures();  // a death may follow the first failure announced
        if (death_ && only_the_dead_are_missing(needed, needed_ranks)) break;
      }
      if (all) g.aborted.reset();
      auto values = store_->multi_get(keys, Deadline::after(std::chrono::seconds(10)));
      for (int r = 0; r < me_.size; ++r) g.records[r] = std::move(values[r]);
      if (!g.complete()) describe_missing(g);
    } catch (const Error& e) {
      note_lost(e);
      g.records.assign(me_.size, std::nullopt);
      g.records[me_.rank] = mine;
      // The announced failure, when there is one, is why the store went away.
      g.aborted = failure_ ? failure_ : lost_;
    }
    return g;
  }

 private:
  /// Fills notes for the missing ranks from their hello/ and phase/ keys.
  void describe_missing(Gathered& g) {
    std::vector<int> missing = g.missing();
    std::vector<std::string> keys;
    for (int r : missing) {
      keys.push_back(key("hello", r));
      keys.push_back(key("phase", r));
    }
    auto v = store_->multi_get(keys, Deadline::after(std::chrono::seconds(10)));
    for (std::size_t i = 0; i < missing.size(); ++i) {
      const auto& hello = v[2 * i];
      const auto& phase = v[2 * i + 1];
      if (!hello)
        g.notes[missing[i]] =
            "never joined the store: not started, or cannot reach " + store_->address();
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
      auto d = Deadline::after(std::chrono::seconds(5));
      auto text = store_->try_get("failures", d);
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
      auto values = store_->multi_get(keys, d);
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
    auto d = Deadline::after(std::chrono::seconds(5));
    auto have = store_->multi_get(needed, d);
    std::vector<std::string> dead;
    for (std::size_t i = 0; i < needed.size(); ++i)
      if (!have[i]) dead.push_back(dead_key(ranks[i]));
    if (dead.empty()) return true;
    auto marked = store_->multi_get(dead, d);
    return std::all_of(marked.begin(), marked.end(), [](const auto& v) { return v.has_value(); });
  }

  /// A store error that is not a timeout means the store is gone for good.
  void note_lost(const Error& e) {
    if (e.code() != ExitCode::timeout && !lost_) lost_ = e.one_line();
  }

  std::unique_ptr<Store> store_;
  StorePlaneIdentity me_;
  int seq_ = 0;
  std::optional<std::string> failure_, death_, lost_;
  std::vector<std::int64_t> own_;  ///< numbers of this rank's own announcements
  std::int64_t seen_ = 0;          ///< announcements read so far
  bool warned_forged_ = false;     ///< the forged-counter warning was logged
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

std::unique_ptr<Plane> make_store_plane(std::unique_ptr<Store> store, const StorePlaneIdentity& me,
                                        Deadline deadline) {
  auto plane = std::make_unique<StorePlane>(std::move(store), me);
  plane->claim(deadline);
  return plane;
}

}  // namespace gpudiag
