// The in-memory store (memory_store.h): what the simulator's nodes forget
// once their ranks are past a checkpoint goes, and nothing else does.
#include "store/memory_store.h"

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

TEST(MemoryStore, DropPrefixForgetsOnlyThatCheckpoint) {
  MemoryStore s;
  const auto d = Deadline::after_seconds(1);
  for (const char* k : {"cp/1/0", "cp/1/digest", "cp/10/0", "cp/2/0", "hello/0"}) s.set(k, "v", d);
  const auto before = s.bytes();
  EXPECT_EQ(s.drop_prefix("cp/1/"), 2u);
  EXPECT_FALSE(s.try_get("cp/1/0", d));
  EXPECT_FALSE(s.try_get("cp/1/digest", d));
  EXPECT_TRUE(s.try_get("cp/10/0", d)) << "checkpoint 10 is not checkpoint 1";
  EXPECT_TRUE(s.try_get("cp/2/0", d));
  EXPECT_TRUE(s.try_get("hello/0", d));
  EXPECT_EQ(s.bytes(), before - 2 * 1 - std::string("cp/1/0cp/1/digest").size());
  EXPECT_EQ(s.drop_prefix("cp/1/"), 0u);
}

}  // namespace
}  // namespace gpudiag
