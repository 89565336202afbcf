// How long a judge waits and how often it looks (relay.h, relay_detail.h),
// counted, not timed: children that are still coming in when the wait that
// began at the first would end are waited for (a level's slack after each,
// up to twice the wait), so a job whose nodes reach a checkpoint over a
// spell longer than the wait has no healthy rank named missing; and a judge
// waiting for its parent's digest asks there a few times more, not in
// proportion, when the wait is eight times as long (the levels above wait as
// long as their slowest child: at 200 ms a look, a supergroup judge's
// requests at the root's store grew with the job).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "plane/checkpoint_digest.h"
#include "store/memory_store.h"
#include "tree/relay.h"

namespace gpudiag {
namespace {

using std::chrono::milliseconds;

/// A node's part: each of its ranks' record, the ranks' wait.
std::string node_part(const TreeLayout& L, int k, long long wait_ms) {
  TreePart p;
  p.checkpoint = "exchange";
  p.wait_ms = wait_ms;
  auto [a, b] = L.ranks_of_node(k);
  for (int r = a; r <= b; ++r) p.records[r] = "rec" + std::to_string(r);
  return encode_part(p);
}

/// The ranks the root's digest of checkpoint 0 names missing; {-1} when
/// there is no digest, or one that does not decode.
std::vector<int> digest_missing(Store& root, int world) {
  auto d = root.try_get("tree/cp/0/digest", Deadline::after_seconds(1));
  Gathered g;
  g.records.resize(static_cast<std::size_t>(world));
  if (!d || !decode_digest(*d, -1, world, g)) return {-1};
  return g.missing;
}

TEST(TreeWaits, ChildrenStillComingInAreWaitedForAndOneThatNeverComesIsNamed) {
  // 8 nodes of 2 ranks under the root. The ranks wait 400 ms and the root a
  // level's 1000 ms more: 1400 ms from the first node, 2800 ms at most.
  // Nodes 0-6 come every 300 ms (node 6 at 1800 ms), node 7 never: only its
  // ranks are missing. A stall of 700 ms between two nodes still passes.
  TreeLayout L{16, 2, 8};
  ASSERT_EQ(L.levels(), 0);
  MemoryStore own("the root");
  RelayOptions o = relay_options(L, RelayLevel::root, 0, milliseconds(400), milliseconds(1000));
  o.below = &own;
  Relay root(o);
  std::thread nodes([&] {
    for (int k = 0; k < 7; ++k) {
      if (k > 0) std::this_thread::sleep_for(milliseconds(300));
      own.set("tree/cp/0/node/" + std::to_string(k), node_part(L, k, 400),
              Deadline::after_seconds(5));
    }
  });
  const bool came = root.collect(0, Deadline::after_seconds(5));
  nodes.join();
  ASSERT_TRUE(came);
  EXPECT_EQ(digest_missing(own, 16), (std::vector<int>{14, 15}));
}

/// A parent's store that counts the requests made to it.
struct Counted : MemoryStore {
  using MemoryStore::MemoryStore;
  std::atomic<int> requests{0};
  void set(const std::string& k, const std::string& v, Deadline d) override {
    ++requests;
    MemoryStore::set(k, v, d);
  }
  std::optional<std::string> try_get(const std::string& k, Deadline d) override {
    ++requests;
    return MemoryStore::try_get(k, d);
  }
  bool wait(const std::vector<std::string>& k, Deadline d) override {
    ++requests;
    return MemoryStore::wait(k, d);
  }
  std::vector<std::optional<std::string>> multi_get(const std::vector<std::string>& k,
                                                    Deadline d) override {
    ++requests;
    return MemoryStore::multi_get(k, d);
  }
};

/// Requests group 1's judge makes at the root's store while the digest
/// comes `after` it started waiting.
int requests_waiting_for_the_digest(milliseconds after) {
  TreeLayout L{32, 2, 4};  // 16 nodes, 4 groups under the root
  MemoryStore own("group 1");
  Counted parent("the root");
  RelayOptions o = relay_options(L, RelayLevel::group, 1, milliseconds(300), milliseconds(0), 1);
  o.below = &own;
  o.above = &parent;
  Relay judge(o);
  std::thread root([&] {
    std::this_thread::sleep_for(after);
    parent.MemoryStore::set("tree/cp/0/digest", encode_digest({}, {}, std::nullopt, "", {}),
                            Deadline::after_seconds(5));
  });
  const bool passed = judge.pass_down(0);
  root.join();
  EXPECT_TRUE(passed);
  EXPECT_TRUE(own.try_get("tree/cp/0/digest", Deadline::after_seconds(1)));
  return parent.requests.load();
}

TEST(TreeWaits, AJudgeWaitingEightTimesAsLongForItsDigestAsksItsParentAFewTimesMore) {
  const int short_wait = requests_waiting_for_the_digest(milliseconds(300));
  const int long_wait = requests_waiting_for_the_digest(milliseconds(2400));
  // A look every 200 ms (a wait and a read of the announcements) made it
  // 4 and 24; backing off, 4 and 8.
  EXPECT_LE(long_wait, 3 * short_wait) << short_wait << " then " << long_wait;
  EXPECT_GE(short_wait, 2);
}

/// The root's own store, watched: says when the root first asks whether a
/// child judge is busy (a MULTI_GET naming a busy key), that is, once its
/// own wait for that child ran out.
class BusyWatch : public StoreView {
 public:
  using StoreView::StoreView;
  std::vector<std::optional<std::string>> multi_get(const std::vector<std::string>& k,
                                                    Deadline d) override {
    for (const auto& key : k)
      if (key.find("/busy/") != std::string::npos) {
        std::lock_guard l(mu_);
        asked_ = true;
        cv_.notify_all();
      }
    return StoreView::multi_get(k, d);
  }
  /// Waits until the root asked, or `done`; true when it asked.
  bool wait_asked(const std::atomic<bool>& done) {
    std::unique_lock l(mu_);
    cv_.wait(l, [&] { return asked_ || done; });
    return asked_;
  }
  void wake() {
    std::lock_guard l(mu_);
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool asked_ = false;
};

// A supergroup judge whose group judge was lost waits kLostJudgeGrace for
// that group's nodes, which may run past the root's own wait (a short
// --timeout: a 4-level simulated tree named 4,096 live ranks missing). It
// says so at the root's store, and the root waits for it instead of naming
// its ranks. Counted, not timed: its part goes in only once the root's wait
// ran out and it asked; a judge that said nothing is named as before.
TEST(TreeWaits, AJudgeWaitingForALostJudgesChildrenIsWaitedForNotNamed) {
  for (bool busy : {true, false}) {
    TreeLayout L{8, 1, 2};  // 8 nodes, 4 groups, 2 supergroups under the root
    ASSERT_EQ(L.levels(), 2);
    MemoryStore own("the root");
    BusyWatch watched(own);
    RelayOptions o = relay_options(L, RelayLevel::root, 0, milliseconds(200), milliseconds(100));
    o.below = &watched;
    Relay root(o);
    auto part = [&](int s) {
      TreePart p;
      p.checkpoint = "exchange";
      p.review = "";
      auto [a, b] = L.ranks_of(2, s);
      for (int r = a; r <= b; ++r) p.records[r] = "rec" + std::to_string(r);
      return encode_part(p);
    };
    own.set("tree/cp/0/group2/0", part(0), Deadline::after_seconds(5));
    if (busy) own.set("tree/cp/0/busy/group2/1", "1", Deadline::after_seconds(5));
    std::atomic<bool> done{false};
    std::thread late([&] {
      if (watched.wait_asked(done) && busy)
        own.set("tree/cp/0/group2/1", part(1), Deadline::after_seconds(5));
    });
    const bool came = root.collect(0, Deadline::after_seconds(30));
    done = true;
    watched.wake();
    late.join();
    ASSERT_TRUE(came);
    EXPECT_EQ(digest_missing(own, 8), busy ? std::vector<int>{} : std::vector<int>({4, 5, 6, 7})) << busy;
  }
}

}  // namespace
}  // namespace gpudiag
