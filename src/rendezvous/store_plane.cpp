#include "rendezvous/store_plane.h"

#include "util/error.h"

namespace gpudiag {

namespace {

constexpr auto kSlice = std::chrono::milliseconds(200);
constexpr auto kFailurePollEvery = std::chrono::milliseconds(100);
constexpr auto kFailureGrace = std::chrono::seconds(2);

std::string key(const char* what, int r) { return std::string(what) + "/" + std::to_string(r); }

class StorePlane : public Plane {
 public:
  StorePlane(std::unique_ptr<Store> store, const StorePlaneIdentity& me)
      : store_(std::move(store)), me_(me) {}

  /// Claims the rank and says who holds it.
  void claim(Deadline deadline) {
    const std::string who = "pid " + std::to_string(me_.pid) + " on " + me_.host +
                            " (local rank " + std::to_string(me_.local_rank) + ")";
    if (store_->add(key("claim", me_.rank), 1, deadline) > 1) {
      auto holder = store_->try_get(key("hello", me_.rank), deadline);
      std::string why = "duplicate RANK=" + std::to_string(me_.rank) + ": " + who +
                        " and " + holder.value_or("another process") + " both claim it";
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
    try {
      store_->set(key("phase", me_.rank), phase, Deadline::after(std::chrono::seconds(5)));
    } catch (const Error&) {
      // A lost store shows up at the next checkpoint with a better message.
    }
  }

  void announce_failure(const std::string& why) override {
    try {
      publish_failure(*store_, me_.rank, why, Deadline::after(std::chrono::seconds(5)));
    } catch (const Error&) {
    }
  }

  std::optional<std::string> peer_failure() override {
    if (failure_ || Deadline::Clock::now() < next_failure_poll_) return failure_;
    next_failure_poll_ = Deadline::Clock::now() + kFailurePollEvery;
    try {
      auto count = store_->try_get("failures", Deadline::after(std::chrono::seconds(5)));
      if (!count || *count == "0") return std::nullopt;
      std::vector<std::string> keys;
      for (int r = 0; r < me_.size; ++r)
        if (r != me_.rank) keys.push_back(key("failed", r));
      for (const auto& v : store_->multi_get(keys, Deadline::after(std::chrono::seconds(5))))
        if (v) return failure_ = *v;
    } catch (const Error& e) {
      return failure_ = e.one_line();
    }
    return std::nullopt;
  }

  Gathered gather_all(const std::string&, const std::string& mine, Deadline deadline) override {
    const std::string prefix = "cp/" + std::to_string(seq_++) + "/";
    std::vector<std::string> keys;
    for (int r = 0; r < me_.size; ++r) keys.push_back(prefix + std::to_string(r));
    Gathered g;
    g.records.resize(me_.size);
    g.notes.resize(me_.size);
    try {
      store_->set(keys[me_.rank], mine, deadline);
      // A failed peer usually still arrives with its record: once a failure is
      // announced, wait only a short grace for the rest, then give up.
      Deadline until = deadline;
      bool all = false;
      while (!(all = store_->wait(keys, until.min(Deadline::after(kSlice))))) {
        if (until.expired()) break;
        if (!g.aborted)
          if (auto f = peer_failure()) {
            g.aborted = *f;
            until = until.min(Deadline::after(kFailureGrace));
          }
      }
      if (all) g.aborted.reset();
      auto values = store_->multi_get(keys, Deadline::after(std::chrono::seconds(10)));
      for (int r = 0; r < me_.size; ++r) g.records[r] = std::move(values[r]);
      if (!all) describe_missing(g);
    } catch (const Error& e) {
      g.records.assign(me_.size, std::nullopt);
      g.records[me_.rank] = mine;
      g.aborted = e.one_line();
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
        g.notes[missing[i]] = "never joined the store: not started, or cannot reach " +
                              store_->address();
      else
        g.notes[missing[i]] = *hello + ", last phase: " + phase.value_or("start");
    }
  }

  std::unique_ptr<Store> store_;
  StorePlaneIdentity me_;
  int seq_ = 0;
  std::optional<std::string> failure_;
  Deadline::Clock::time_point next_failure_poll_{};
};

}  // namespace

void publish_failure(Store& store, int rank, const std::string& why, Deadline deadline) {
  store.set(key("failed", rank), why, deadline);
  store.add("failures", 1, deadline);
}

std::unique_ptr<Plane> make_store_plane(std::unique_ptr<Store> store, const StorePlaneIdentity& me,
                                        Deadline deadline) {
  auto plane = std::make_unique<StorePlane>(std::move(store), me);
  plane->claim(deadline);
  return plane;
}

}  // namespace gpudiag
