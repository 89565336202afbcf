// The store plane (store_plane.h): a rank's claim and goodbye, its phase, the
// failures it announces and reads, and whether the store still answers; a
// checkpoint itself is in store_plane_gather.cpp.
#include "plane/store_plane.h"

#include "plane/store_plane_detail.h"

namespace gpudiag {

namespace store_plane_detail {

/// Claims the rank and says who holds it.
void StorePlane::claim(Deadline deadline) {
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
StorePlane::~StorePlane() {
  if (lost_) return;
  try {
    store_->set(key("bye", me_.rank), "1", Deadline::after(std::chrono::seconds(2)));
  } catch (const Error&) {
  }
}

void StorePlane::note_phase(const std::string& phase) {
  if (lost_) return;
  try {
    answered([&](Deadline d) { store_->set(key("phase", me_.rank), phase, d); });
  } catch (const Error& e) {
    note_lost(e);
  }
}

void StorePlane::announce_failure(const std::string& why) {
  if (lost_) return;
  try {
    own_.push_back(answered(
        [&](Deadline d) { return publish_failure(*store_, why, d, FailureKind::failed); }));
  } catch (const Error& e) {
    note_lost(e);
  }
}

std::optional<std::string> StorePlane::peer_failure() {
  poll_failures();
  if (death_) return death_;
  if (failure_) return failure_;
  return lost_;
}

std::optional<std::string> StorePlane::lost_plane() {
  if (!lost_) {
    try {
      answered([&](Deadline d) { return store_->try_get("failures", d); });
    } catch (const Error& e) {
      note_lost(e);
    }
  }
  return lost_;
}

/// Reads the announcements made since the last look (at most every 100 ms).
/// The counter and the texts come from the store, which anyone who knows its
/// address and token can write: a counter that is not a number or is beyond
/// what this job can announce is ignored with one warning, at most a bounded
/// number of announcements is read per look, and texts are cut to one line.
void StorePlane::poll_failures() {
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
    for (std::int64_t n = seen_ + 1; n <= upto; ++n) keys.push_back("failure/" + std::to_string(n));
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
bool StorePlane::only_the_dead_are_missing(const std::vector<std::string>& needed,
                                           const std::vector<int>& ranks) {
  auto have = answered([&](Deadline d) { return store_->multi_get(needed, d); });
  std::vector<std::string> dead;
  for (std::size_t i = 0; i < needed.size(); ++i)
    if (!have[i]) dead.push_back(dead_key(ranks[i]));
  if (dead.empty()) return true;
  auto marked = answered([&](Deadline d) { return store_->multi_get(dead, d); });
  return std::all_of(marked.begin(), marked.end(), [](const auto& v) { return v.has_value(); });
}

/// One read for the ranks that ask under `key` (plane.h): a claim counter
/// picks the first, whose text every other rank waits for; the reader's
/// death, a lost store or the deadline make a waiter read for itself. A
/// reader whose read throws leaves an empty text, which sends the waiters to
/// their own read at once (and to their own error, the one it would give).
NodeRead StorePlane::read_on_node(const std::string& key, NodeReader who,
                                  const std::function<std::string()>& read, Deadline deadline) {
  const std::string k = "node/" + key;
  bool reader = who == NodeReader::me;
  try {
    if (who == NodeReader::first)
      reader = answered([&](Deadline d) { return store_->add(k + "/claim", 1, d); }) == 1;
  } catch (const Error& e) {
    note_lost(e);
    return {read(), true};
  }
  if (reader) {
    std::string text;
    try {
      text = read();
    } catch (...) {
      try {
        answered([&](Deadline d) { set(k, "", d); });
      } catch (const Error&) {
      }
      throw;
    }
    try {
      answered([&](Deadline d) { set(k, text, d); });
    } catch (const Error& e) {
      note_lost(e);
    }
    return {text, true};
  }
  try {
    while (!store_->wait({k}, deadline.min(Deadline::after(kSlice)))) {
      poll_failures();
      // A check stops at a failure (its reader may be the one that failed);
      // a sweep goes on past them, and waits for its reader.
      if (deadline.expired() || death_ || lost_ || (failure_ && !patient_)) return {read(), true};
    }
    auto v = answered([&](Deadline d) { return store_->try_get(k, d); });
    if (v && !v->empty() && v->size() <= kMaxNodeReadText) {
      bytes_ += v->size();
      return {std::move(*v), false};
    }
  } catch (const Error& e) {
    note_lost(e);
  }
  return {read(), true};
}

/// A store error that is not a timeout means the store is gone for good.
void StorePlane::note_lost(const Error& e) {
  if (e.code() != ExitCode::timeout && !lost_)
    // Under node leaders the store is the node's: say whose it was.
    lost_ = e.one_line() + (me_.tree && e.one_line().find(server_) == std::string::npos
                                ? " (" + server_ + " served it)"
                                : "");
}

}  // namespace store_plane_detail

using store_plane_detail::dead_key;
using store_plane_detail::StorePlane;

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
