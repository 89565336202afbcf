// KeyOwners: which connection may write which key of the store.
#include "rendezvous/key_owners.h"

#include <gtest/gtest.h>

#include "rendezvous/store_wire.h"

namespace gpudiag {
namespace {

constexpr std::uint32_t kNone = storewire::kNoRank;

TEST(KeyOwners, ARanksRecordsComeOnlyFromTheFirstConnectionThatClaimedIt) {
  KeyOwners o(4, false);
  EXPECT_FALSE(o.greeted(10, 1, "a:1"));
  for (const char* k : {"hello/1", "phase/1", "cp/0/1", "cp/12/1", "claim/1", "failures",
                        "failure/3", "anything/else"})
    EXPECT_FALSE(o.refuse(10, 1, k, false)) << k;
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
  EXPECT_FALSE(launched.refuse(2, kNone, "failures", true));
  EXPECT_FALSE(launched.refuse(2, kNone, "failure/1", false));
  EXPECT_TRUE(launched.refuse(2, kNone, "hello/1", false));
}

TEST(KeyOwners, RanksBeyondTheWorldWriteOnlyTheirOwnKeys) {
  KeyOwners o(2, false);
  EXPECT_FALSE(o.greeted(5, 7, "c:3"));  // WORLD_SIZE differs: rank 7 of a larger world
  EXPECT_FALSE(o.refuse(5, 7, "hello/7", false));
  EXPECT_FALSE(o.refuse(5, 7, "failures", true));
  EXPECT_TRUE(o.refuse(5, 7, "hello/1", false));
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

}  // namespace
}  // namespace gpudiag
