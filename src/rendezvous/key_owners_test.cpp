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

}  // namespace
}  // namespace gpudiag
