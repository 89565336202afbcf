// KeyOwners: which connection may write which key of the store.
#include "store/key_owners.h"

#include <gtest/gtest.h>

#include "store/store_wire.h"

namespace gpudiag {
namespace {

constexpr std::uint32_t kNone = storewire::kNoRank;

TEST(KeyOwners, ARanksRecordsComeOnlyFromTheFirstConnectionThatClaimedIt) {
  KeyOwners o(4, false);
  EXPECT_FALSE(o.greeted(10, 1, "a:1"));
  for (const char* k : {"hello/1", "phase/1", "cp/0/1", "cp/12/1", "claim/1", "anything/else"})
    EXPECT_FALSE(o.refuse(10, 1, k, false)) << k;
  EXPECT_FALSE(o.refuse(10, 1, "failures", true));
  EXPECT_TRUE(o.refuse(10, 1, "failures", false));  // the counter is only added to
  for (const char* k : {"hello/2", "phase/0", "cp/0/2", "cp/0/digest", "claim/2", "dead/1"})
    EXPECT_TRUE(o.refuse(10, 1, k, false)) << k;
  // A second connection claiming rank 1 is a duplicate: it may only add to its claim.
  auto dup = o.greeted(11, 1, "b:2");
  ASSERT_TRUE(dup);
  EXPECT_EQ(*dup, "a second connection claimed rank 1 (again, from b:2)");
  EXPECT_FALSE(o.refuse(11, 1, "claim/1", true));
  // Whoever's ADD comes first, the owner hears 1 and the duplicate 2.
  EXPECT_EQ(o.claim_answer(11, 1, "claim/1"), 2);
  EXPECT_EQ(o.claim_answer(10, 1, "claim/1"), 1);
  EXPECT_FALSE(o.claim_answer(10, 1, "claim/2"));
  for (const char* k : {"claim/1", "hello/1", "cp/0/1", "failures", "failure/1"})
    EXPECT_TRUE(o.refuse(11, 1, k, false)) << k;
  EXPECT_FALSE(o.refuse(11, 1, "anything/else", false));
}

TEST(KeyOwners, TheDigestIsRankZerosAndDeathsAreLaunchers) {
  KeyOwners by_hand(2, false), launched(2, true);
  for (KeyOwners* o : {&by_hand, &launched}) {
    o->greeted(1, 0, "a:1");
    EXPECT_FALSE(o->refuse(1, 0, "cp/3/digest", false));
    EXPECT_TRUE(o->refuse(1, 0, "dead/1", false));
    o->greeted(2, kNone, "launcher:1");
  }
  EXPECT_TRUE(by_hand.refuse(2, kNone, "dead/1", false));
  EXPECT_TRUE(by_hand.refuse(2, kNone, "failures", true));
  EXPECT_FALSE(launched.refuse(2, kNone, "dead/1", false));
  EXPECT_FALSE(launched.refuse_add(2, kNone, "failures", 1));
  EXPECT_TRUE(launched.refuse(2, kNone, "failure/1", false));  // not numbered for it yet
  launched.added(2, "failures", 1);
  EXPECT_FALSE(launched.refuse(2, kNone, "failure/1", false));
  EXPECT_TRUE(launched.refuse(2, kNone, "hello/1", false));
}

TEST(KeyOwners, RanksBeyondTheWorldWriteOnlyTheirOwnKeys) {
  KeyOwners o(2, false);
  EXPECT_FALSE(o.greeted(5, 7, "c:3"));  // WORLD_SIZE differs: rank 7 of a larger world
  EXPECT_FALSE(o.refuse(5, 7, "hello/7", false));
  EXPECT_TRUE(o.refuse(5, 7, "hello/1", false));
  // Outside the job: no announcement (the forged failure of issue 27).
  auto why = o.refuse_add(5, 7, "failures", 1);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("outside this job of 2 ranks"), std::string::npos) << *why;
  EXPECT_TRUE(o.refuse(5, 7, "failure/1", false));
}

TEST(KeyOwners, AnnouncementsAreOnesNumberedForTheirConnectionAndBounded) {
  KeyOwners o(2, false);
  o.greeted(1, 0, "a:1");
  o.greeted(2, 1, "b:1");
  // ADD failures 1e15 would push the counter past every announcement the
  // job can read, hiding a real death: refused; so is any amount but 1.
  for (std::int64_t d : {std::int64_t{1000000000000000}, std::int64_t{0}, std::int64_t{-1}, std::int64_t{2}})
    EXPECT_TRUE(o.refuse_add(1, 0, "failures", d)) << d;
  ASSERT_FALSE(o.refuse_add(1, 0, "failures", 1));
  o.added(1, "failures", 1);
  EXPECT_FALSE(o.refuse(1, 0, "failure/1", false));
  EXPECT_TRUE(o.refuse(2, 1, "failure/1", false));  // rank 1 may not rewrite rank 0's text
  EXPECT_TRUE(o.refuse(1, 0, "failure/2", false));  // nor rank 0 a number it was not given
  for (int i = 1; i < kRankAnnouncements; ++i) {
    ASSERT_FALSE(o.refuse_add(1, 0, "failures", 1)) << i;
    o.added(1, "failures", 1 + i);
  }
  EXPECT_TRUE(o.refuse_add(1, 0, "failures", 1));  // the budget is spent
  EXPECT_FALSE(o.refuse_add(2, 1, "failures", 1));  // rank 1 still has its own
}

TEST(KeyOwners, OffAnyoneWritesAnythingButTheStoresOwnKeys) {
  KeyOwners o(0, false);
  EXPECT_FALSE(o.greeted(1, 3, "a:1"));
  EXPECT_FALSE(o.greeted(2, 3, "a:2"));
  EXPECT_FALSE(o.refuse(2, kNone, "hello/3", false));
  EXPECT_FALSE(o.refuse(2, kNone, "dead/3", false));
  EXPECT_TRUE(o.refuse(2, 3, "server", false));
  EXPECT_TRUE(o.refuse(2, 3, "duplicates", false));
}

// Under the tree of judges (set_tree): an outsider without the secret, claiming
// no rank or another rank, cannot write any key family that makes a verdict,
// on the root's store or on a node's; a node's leader and a group's judge write
// only for their own place; the store's own process writes everything.
namespace tree_owners {

TreeLayout layout() {
  TreeLayout L;
  L.world = 64;  // 8 nodes of 8, groups of 2 nodes
  L.per_node = 8;
  L.group_nodes = 2;
  return L;
}

const char* kVerdictKeys[] = {"dead/5",          "failures",          "failure/1",
                              "tree/cp/0/node/3", "tree/cp/0/group/1", "tree/group/1",
                              "tree/lost/0",      "tree/bye/node/3",   "tree/bye/group/1",
                              "tree/cp/0/digest", "cp/0/digest",       "cp/0/5"};

TEST(KeyOwnersTree, AnOutsiderForgesNothingOnTheRootOrANodesStore) {
  for (auto kind : {TreeStoreRole::Kind::root, TreeStoreRole::Kind::node}) {
    KeyOwners o(64, /*launchers_allowed=*/true, kind == TreeStoreRole::Kind::node);
    o.set_tree({kind, kind == TreeStoreRole::Kind::node ? 0 : 0, layout()});
    o.greeted(1, kNone, "outsider:1");  // no rank: a launcher elsewhere, nobody here
    o.greeted(2, 63, "outsider:2");     // a rank of another node
    for (const char* k : kVerdictKeys) {
      const bool add = std::string(k) == "failures";
      EXPECT_TRUE(o.refuse(1, kNone, k, add)) << k;
      if (std::string(k) != "failures" && std::string(k) != "failure/1")
        EXPECT_TRUE(o.refuse(2, 63, k, add)) << k;
    }
    // A claim it does not own is worth nothing: node 3 is claimed first elsewhere.
    o.greeted(3, storewire::node_claim(3), "leader3:1");
    o.greeted(4, storewire::node_claim(3), "impostor:1");
    EXPECT_FALSE(o.refuse(3, storewire::node_claim(3), "dead/25", false));  // rank 25: node 3
    EXPECT_TRUE(o.refuse(4, storewire::node_claim(3), "dead/25", false));
    EXPECT_TRUE(o.refuse(4, storewire::node_claim(3), "tree/cp/0/node/3", false));
  }
}

TEST(KeyOwnersTree, LeadersAndGroupJudgesWriteForTheirOwnPlaceOnly) {
  KeyOwners root(64, true);
  root.set_tree({TreeStoreRole::Kind::root, 0, layout()});
  root.greeted(1, storewire::node_claim(3), "node3");
  root.greeted(2, storewire::group_claim(1), "group1");  // nodes 2-3, ranks 16-31
  root.greeted(3, storewire::kRootClaim, "root");
  const auto n3 = storewire::node_claim(3), g1 = storewire::group_claim(1);
  for (const char* k : {"tree/cp/0/node/3", "tree/bye/node/3", "tree/lost/1", "dead/24", "dead/31"})
    EXPECT_FALSE(root.refuse(1, n3, k, false)) << k;
  for (const char* k : {"tree/cp/0/node/2", "tree/lost/0", "dead/23", "tree/cp/0/group/1",
                        "tree/group/1", "tree/cp/0/digest", "cp/0/24"})
    EXPECT_TRUE(root.refuse(1, n3, k, false)) << k;
  for (const char* k : {"tree/cp/0/group/1", "tree/bye/group/1", "tree/group/1", "dead/16", "dead/31"})
    EXPECT_FALSE(root.refuse(2, g1, k, false)) << k;
  for (const char* k : {"tree/cp/0/group/0", "tree/group/0", "dead/15", "dead/32", "tree/cp/0/node/3",
                        "tree/cp/0/digest"})
    EXPECT_TRUE(root.refuse(2, g1, k, false)) << k;
  // The root judge on its own store writes the digest and anything else.
  for (const char* k : kVerdictKeys)
    EXPECT_FALSE(root.refuse(3, storewire::kRootClaim, k, std::string(k) == "failures")) << k;
  // Announcements: a judge adds 1 at a time, and failure/<n> only for its own n.
  EXPECT_FALSE(root.refuse_add(1, n3, "failures", 1));
  root.added(1, "failures", 1);
  EXPECT_FALSE(root.refuse(1, n3, "failure/1", false));
  EXPECT_TRUE(root.refuse(2, g1, "failure/1", false));
}

// Past two levels (64 nodes of 1, fan-out 4: 16 groups, 4 supergroups) a
// supergroup's judge claims its own place; a place under a lost judge says so.
TEST(KeyOwnersTree, SupergroupJudgesWriteForTheirOwnPlaceOnly) {
  TreeLayout L{64, 1, 4};
  ASSERT_EQ(L.levels(), 2);
  KeyOwners root(64, true);
  root.set_tree({TreeStoreRole::Kind::root, 0, L});
  const auto s1 = storewire::group_claim(1, 2), g5 = storewire::group_claim(5),
             g9 = storewire::group_claim(9), n20 = storewire::node_claim(20);
  EXPECT_EQ(storewire::claim_level(s1), 2);
  EXPECT_TRUE(storewire::is_tree_claim(s1));
  root.greeted(1, s1, "super1");  // groups 4-7, nodes 16-31
  root.greeted(2, g5, "group5");
  root.greeted(3, g9, "group9");
  root.greeted(4, n20, "node20");
  for (const char* k :
       {"tree/cp/0/group2/1", "tree/cp/0/busy/group2/1", "tree/bye/group2/1", "tree/group2/1", "dead/16"})
    EXPECT_FALSE(root.refuse(1, s1, k, false)) << k;
  for (const char* k : {"tree/cp/0/group2/0", "tree/cp/0/busy/group2/0", "tree/group2/0", "tree/cp/0/group/5",
                        "tree/cp/0/busy/group/5", "tree/cp/0/busy/", "dead/32", "tree/lost/group2/1"})
    EXPECT_TRUE(root.refuse(1, s1, k, false)) << k;
  EXPECT_TRUE(root.refuse(2, g5, "tree/cp/0/busy/group2/1", false)) << "only that judge says it is busy";
  // Its lost judge is reported by what lies under it, at any depth.
  EXPECT_FALSE(root.refuse(2, g5, "tree/lost/group2/1", false));
  EXPECT_FALSE(root.refuse(4, n20, "tree/lost/group2/1", false));
  EXPECT_FALSE(root.refuse(4, n20, "tree/lost/5", false));
  EXPECT_TRUE(root.refuse(3, g9, "tree/lost/group2/1", false));
  EXPECT_TRUE(root.refuse(2, g5, "tree/lost/4", false));
  EXPECT_TRUE(root.refuse(4, n20, "tree/lost/4", false));
}

// A node leader holds its place at the root on several connections of its
// host (its join, the lost group's report); while they are open another
// host's claim is a duplicate, and once all close the place is free.
TEST(KeyOwnersTree, AJudgesPlaceIsFreeAgainWhenItsConnectionCloses) {
  KeyOwners root(64, true);
  root.set_tree({TreeStoreRole::Kind::root, 0, layout()});
  const auto n3 = storewire::node_claim(3);
  root.greeted(1, n3, "10.0.0.4:5001");
  root.greeted(2, n3, "10.0.0.4:5002");  // the same judge's second connection
  root.greeted(3, n3, "10.0.0.9:5003");  // another host while it holds it: a duplicate
  EXPECT_FALSE(root.refuse(2, n3, "tree/lost/1", false));
  EXPECT_TRUE(root.refuse(3, n3, "tree/lost/1", false));
  root.closed(3, n3);  // the duplicate's close frees nothing
  root.closed(1, n3);
  EXPECT_FALSE(root.refuse(2, n3, "tree/lost/1", false));
  root.closed(2, n3);  // the last: the place is free
  root.greeted(4, n3, "10.0.0.5:5004");
  EXPECT_FALSE(root.refuse(4, n3, "tree/lost/1", false));
  EXPECT_TRUE(root.refuse(1, n3, "tree/lost/1", false));
}

TEST(KeyOwnersTree, TheStoresOwnProcessIsTrustedAndNothingElseIsALauncher) {
  KeyOwners node(64, true, true);
  node.set_tree({TreeStoreRole::Kind::node, 2, layout()});
  node.greeted(9, kNone, "same process");
  for (const char* k : kVerdictKeys)
    EXPECT_FALSE(node.refuse(9, kNone, k, std::string(k) == "failures", /*trusted=*/true)) << k;
  EXPECT_TRUE(node.refuse(9, kNone, "server", false, true));  // the store's own key, still
  // Without the trust the same connection is an outsider.
  EXPECT_TRUE(node.refuse(9, kNone, "dead/17", false));
  EXPECT_TRUE(node.refuse(9, kNone, "cp/0/digest", false));
}

}  // namespace tree_owners

}  // namespace
}  // namespace gpudiag
