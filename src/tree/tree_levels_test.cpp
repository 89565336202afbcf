// The tree of judges past two levels (tree.h, relay.h): the layout decides
// how many levels of judges a job gets and names them by their ranges, and a
// whole job's checkpoints go through node leaders, groups, supergroups and the
// root in one process (MemoryStores, real Relays and StorePlanes), with a
// fault at every level: a missing rank, a silent leader, a lost group judge
// and a lost supergroup judge whose host (its first group's judge and its
// first node's leader) went with it, all named by every rank still there.
#include <gtest/gtest.h>

#include "tree/gone_store_test.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "store/memory_store.h"
#include "tree/relay.h"
#include "plane/store_plane.h"
#include "util/error.h"

namespace gpudiag {
namespace {

TEST(TreeLevels, TheLayoutAddsALevelPastEachFanOut) {
  EXPECT_EQ((TreeLayout{1024, 8, 128}).levels(), 0);      // 128 nodes under the root
  EXPECT_EQ((TreeLayout{102400, 8, 128}).levels(), 1);    // 100 groups
  EXPECT_EQ((TreeLayout{131072, 8, 128}).levels(), 1);    // 128 groups: the root takes them all
  EXPECT_EQ((TreeLayout{131080, 8, 128}).levels(), 2);    // 129 groups: supergroups
  TreeLayout L{262144, 8, 128};
  EXPECT_EQ(L.nodes(), 32768);
  EXPECT_EQ(L.levels(), 2);
  EXPECT_EQ(L.groups(), 256);
  EXPECT_EQ(L.judges(2), 2);
  EXPECT_EQ(L.judges(3), 0);
  EXPECT_EQ(L.span(2), 16384);
  EXPECT_EQ(L.judge_of_node(2, 16384), 1);
  EXPECT_EQ(L.judge_above(2, 1, 200), 1);
  EXPECT_EQ(L.judge_above(2, 0, 16383), 0);
  EXPECT_EQ(L.children_of(2, 1), std::make_pair(128, 255));
  EXPECT_EQ(L.children_of(1, 255), std::make_pair(32640, 32767));
  EXPECT_EQ(L.ranks_of(2, 1), std::make_pair(131072, 262143));
  EXPECT_EQ(L.label(2, 1), "supergroup 1 (groups 128-255, nodes 16384-32767, ranks 131072-262143)");
  EXPECT_EQ(L.group_label(255), "group 255 (nodes 32640-32767, ranks 261120-262143)");
  EXPECT_EQ(L.label(0, 7), "node 7 (ranks 56-63)");
  EXPECT_EQ(TreeLayout::level_key(2), "group2");
}

TEST(TreeLevels, EveryLevelsRangesCoverTheJobOnceEvenWhenTheLastGroupsAreShort) {
  TreeLayout L{1000, 2, 3};  // 500 nodes, fan-out 3: 167 groups, 56, 19, 7, 3 judges
  ASSERT_EQ(L.levels(), 5);
  for (int level = 0; level <= L.levels(); ++level) {
    int next = 0;
    for (int j = 0; j < L.judges(level); ++j) {
      auto [a, b] = L.ranks_of(level, j);
      EXPECT_EQ(a, next) << level << " " << j;
      EXPECT_LE(a, b);
      next = b + 1;
      if (level > 0) {
        auto [c0, c1] = L.children_of(level, j);
        EXPECT_LE(c1 - c0 + 1, 3);
        EXPECT_EQ(L.ranks_of(level - 1, c0).first, a);
        EXPECT_EQ(L.ranks_of(level - 1, c1).second, b);
      }
    }
    EXPECT_EQ(next, 1000) << level;
  }
  EXPECT_LE(L.judges(L.levels()), 3);  // the root's children
  EXPECT_EQ(L.label(3, 18), "level-3 group 18 (supergroups 54-55, nodes 486-499, ranks 972-999)");
}

/// A job of any depth in one thread: a store per judge, a relay per judge
/// and per node, a plane per rank, driven level by level.
struct Chain {
  TreeLayout L;
  std::map<std::pair<int, int>, std::unique_ptr<MemoryStore>> stores;  ///< (level, j); root at levels+1
  std::set<std::pair<int, int>> lost;  ///< judges gone from the start
  std::set<int> silent;                ///< nodes whose leader never reports
  GoneStore gone;
  std::vector<std::unique_ptr<Store>> links;
  std::map<std::pair<int, int>, std::unique_ptr<Relay>> relays;
  std::vector<std::unique_ptr<Plane>> planes;

  explicit Chain(TreeLayout layout) : L(layout) {}
  int top() const { return L.levels() + 1; }
  Store* store(int level, int j) {
    if (lost.count({level, j})) return &gone;
    auto& s = stores[{level, j}];
    if (!s) s = std::make_unique<MemoryStore>("s" + std::to_string(level) + "." + std::to_string(j));
    links.push_back(std::make_unique<StoreView>(*s));
    return links.back().get();
  }
  Store* up(int level, int j, int l) { return store(l, l == top() ? 0 : L.judge_above(l, level, j)); }

  void build() {
    for (int level = 0; level <= top(); ++level)
      for (int j = 0; j < (level == top() ? 1 : L.judges(level)); ++j) {
        if (level > 0 && level < top() && lost.count({level, j})) continue;
        const RelayLevel kind = level == 0 ? RelayLevel::node
                                : level == top() ? RelayLevel::root : RelayLevel::group;
        RelayOptions o = relay_options(L, kind, j, std::chrono::milliseconds(300),
                                       std::chrono::milliseconds(0), level);
        o.digest_grace = std::chrono::milliseconds(2000);
        o.below = level == 0 ? store(-1, j) : store(level, j);
        if (level < top()) {
          o.above = up(level, j, level + 1);
          for (int l = level + 2; l <= top(); ++l) o.beyond.push_back(up(level, j, l));
        }
        relays[{level, j}] = std::make_unique<Relay>(o);
      }
    for (int r = 0; r < L.world; ++r) {
      const int k = L.node_of(r);
      StorePlaneIdentity id{r, L.world, r % L.per_node, "n" + std::to_string(k), 1000 + r};
      id.tree = true;
      std::tie(id.node_first, id.node_last) = L.ranks_of_node(k);
      id.judge_grace = std::chrono::milliseconds(3000);
      planes.push_back(make_store_plane(std::make_unique<StoreView>(*stores[{-1, k}]), id,
                                        Deadline::after_seconds(5)));
    }
  }
  bool runs(int level, int j) const { return relays.count({level, j}) && !(level == 0 && silent.count(j)); }

  /// One checkpoint; returns the ranks each rank names missing (empty: it
  /// did not arrive or got no digest).
  std::vector<std::vector<int>> checkpoint(int seq, const std::set<int>& absent) {
    auto arrives = [&](int r) { return !absent.count(r) && !silent.count(L.node_of(r)); };
    for (int r = 0; r < L.world; ++r)
      if (arrives(r))
        publish_record(*planes[r], "exchange", "rec" + std::to_string(r), {},
                       Deadline::after(std::chrono::milliseconds(300)));
    for (int level = 0; level <= top(); ++level)  // bottom up
      for (auto& [at, relay] : relays)
        if (at.first == level && runs(at.first, at.second)) relay->collect(seq, Deadline::after_seconds(5));
    for (int level = top() - 1; level >= 0; --level)  // and the digest back down
      for (auto& [at, relay] : relays)
        if (at.first == level && runs(at.first, at.second)) relay->pass_down(seq);
    std::vector<std::vector<int>> out(L.world);
    for (int r = 0; r < L.world; ++r)
      if (arrives(r)) {
        auto g = planes[r]->gather_all("exchange", "rec" + std::to_string(r),
                                       Deadline::after_seconds(1), {}, {}, {});
        if (g.judged) out[r] = g.missing;
      }
    return out;
  }
};

TEST(TreeLevels, AFaultAtEveryLevelOfThreeIsNamedByEveryRankStillThere) {
  // 24 nodes of 2 ranks, 4 children a judge: groups of 4 nodes (6), supergroups
  // of 4 groups (2: groups 0-3 and 4-5), the root over the supergroups.
  Chain c(TreeLayout{48, 2, 4});
  ASSERT_EQ(c.L.levels(), 2);
  c.silent = {5};        // a leader: ranks 10-11
  c.lost = {{1, 2}};     // group 2's judge: nodes 8-11 report to supergroup 0
  // Supergroup 1's host dies: its judge, group 4's and node 16's leader.
  c.lost.insert({2, 1});
  c.lost.insert({1, 4});
  c.silent.insert(16);  // ranks 32-33
  c.build();
  const std::vector<int> want{3, 10, 11, 32, 33};
  for (int seq = 0; seq < 2; ++seq) {
    auto seen = c.checkpoint(seq, {3});
    for (int r = 0; r < 48; ++r) {
      if (r == 3 || r == 10 || r == 11 || r == 32 || r == 33) continue;
      EXPECT_EQ(seen[r], want) << "rank " << r << " at checkpoint " << seq;
    }
  }
  // Nodes past both lost judges said so at the root, group 5's judge too.
  auto& root = *c.stores[{3, 0}];
  EXPECT_TRUE(root.try_get("tree/lost/4", Deadline::after_seconds(1)));
  EXPECT_TRUE(root.try_get("tree/lost/group2/1", Deadline::after_seconds(1)));
  EXPECT_TRUE(root.try_get("tree/cp/0/group/5", Deadline::after_seconds(1)));
  EXPECT_TRUE(root.try_get("tree/cp/0/node/17", Deadline::after_seconds(1)));
  // Group 2's nodes reported one level up, not to the root.
  auto& super0 = *c.stores[{2, 0}];
  EXPECT_TRUE(super0.try_get("tree/lost/2", Deadline::after_seconds(1)));
  EXPECT_TRUE(super0.try_get("tree/cp/0/node/9", Deadline::after_seconds(1)));
  EXPECT_FALSE(root.try_get("tree/cp/0/node/9", Deadline::after_seconds(1)));
}

TEST(TreeLevels, ASilentLeaderIsNamedWithItsRangeThreeLevelsUp) {
  Chain c(TreeLayout{48, 2, 4});
  c.silent = {13};  // ranks 26-27, group 3, supergroup 0
  c.build();
  auto seen = c.checkpoint(0, {});
  EXPECT_EQ(seen[47], (std::vector<int>{26, 27}));
  EXPECT_EQ(seen[0], (std::vector<int>{26, 27}));
}

/// A parent judge's store that is gone, counting the calls made to it.
struct CountedGone : GoneStore {
  int calls = 0;
  std::optional<std::string> try_get(const std::string& k, Deadline d) override {
    ++calls;
    return GoneStore::try_get(k, d);
  }
  bool wait(const std::vector<std::string>& k, Deadline d) override {
    ++calls;
    return GoneStore::wait(k, d);
  }
  void set(const std::string& k, const std::string& v, Deadline d) override {
    ++calls;
    GoneStore::set(k, v, d);
  }
  std::vector<std::optional<std::string>> multi_get(const std::vector<std::string>& k,
                                                    Deadline d) override {
    ++calls;
    return GoneStore::multi_get(k, d);
  }
};

TEST(TreeLevels, AJudgeThatFindsItsParentGoneWhileItWaitsGoesUpAtOnceAndAsksItNoMore) {
  // Group 0's judge waits for its nodes, none of which came yet, when it
  // finds supergroup 0's store gone: it says so at the root at once (the
  // root then waits for supergroup 0's groups), and never asks the gone
  // store again: a real client would reconnect to a refused port for the
  // whole of a request's wait, every time, and the group would reach the
  // root after the root's deadline (its ranks named missing by every rank).
  TreeLayout L{16, 2, 2};  // 8 nodes, 4 groups, 2 supergroups
  ASSERT_EQ(L.levels(), 2);
  MemoryStore own("group 0"), root("the root");
  CountedGone parent;
  RelayOptions o = relay_options(L, RelayLevel::group, 0, std::chrono::milliseconds(300),
                                 std::chrono::milliseconds(0), 1);
  o.below = &own;
  o.above = &parent;
  o.beyond = {&root};
  Relay judge(o);
  EXPECT_FALSE(judge.collect(0, Deadline::after(std::chrono::milliseconds(700))));
  EXPECT_EQ(parent.calls, 1);
  EXPECT_TRUE(root.try_get("tree/lost/group2/0", Deadline::after_seconds(1)));
}

}  // namespace
}  // namespace gpudiag
