#include "store/store_state.h"

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

TEST(StoreState, WaiterWakesWhenItsLastMissingKeyIsCreated) {
  StoreState s;
  std::vector<StoreState::WaiterId> woken;
  s.set("a", "1", woken);
  EXPECT_FALSE(s.park(7, {"a", "b", "c", "b"}));  // duplicates count once
  s.set("b", "x", woken);
  EXPECT_TRUE(woken.empty());
  s.set("b", "y", woken);  // overwriting an existing key wakes nobody
  EXPECT_TRUE(woken.empty());
  s.add("c", 1, woken);
  EXPECT_EQ(woken, std::vector<StoreState::WaiterId>{7});
  EXPECT_EQ(s.parked_count(), 0u);
}

TEST(StoreState, ParkReturnsTrueWhenAllKeysExist) {
  StoreState s;
  std::vector<StoreState::WaiterId> woken;
  s.set("k", "v", woken);
  EXPECT_TRUE(s.park(1, {"k"}));
  EXPECT_TRUE(s.park(2, {}));
  EXPECT_EQ(s.parked_count(), 0u);
}

TEST(StoreState, CancelledWaiterIsNotWoken) {
  StoreState s;
  std::vector<StoreState::WaiterId> woken;
  EXPECT_FALSE(s.park(1, {"k"}));
  EXPECT_FALSE(s.park(2, {"k"}));
  s.cancel(1);
  s.cancel(99);  // unknown: no-op
  s.set("k", "v", woken);
  EXPECT_EQ(woken, std::vector<StoreState::WaiterId>{2});
}

TEST(StoreState, AddKeepsDecimalTextAndRefusesNonIntegers) {
  StoreState s;
  std::vector<StoreState::WaiterId> woken;
  EXPECT_EQ(s.add("n", 5, woken), 5);
  EXPECT_EQ(s.add("n", -7, woken), -2);
  EXPECT_EQ(*s.find("n"), "-2");
  s.set("t", "abc", woken);
  EXPECT_EQ(s.add("t", 1, woken), std::nullopt);
  EXPECT_EQ(*s.find("t"), "abc");
}

TEST(StoreState, AddRefusesToOverflowAForgedCounter) {
  StoreState s;
  std::vector<StoreState::WaiterId> woken;
  s.set("failures", "9223372036854775807", woken);
  EXPECT_EQ(s.add("failures", 1, woken), std::nullopt);
  EXPECT_EQ(*s.find("failures"), "9223372036854775807");
  s.set("low", "-9223372036854775808", woken);
  EXPECT_EQ(s.add("low", -1, woken), std::nullopt);
}

}  // namespace
}  // namespace gpudiag
