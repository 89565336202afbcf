#include "checks/watchdog.h"

#include <gtest/gtest.h>

#include <thread>

namespace gpudiag {
namespace {

TEST(Watchdog, QuietWhenThePhaseEndsInTime) {
  Watchdog w("h-0");
  w.arm("device", Deadline::after(std::chrono::milliseconds(200)));
  w.disarm();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  SUCCEED();
}

TEST(WatchdogDeathTest, ReportsTheStuckPhaseAndExitsWithTheTimeoutStatus) {
  EXPECT_EXIT(
      {
        Watchdog w("node3-1");
        w.arm("device", Deadline::after(std::chrono::milliseconds(100)));
        std::this_thread::sleep_for(std::chrono::seconds(5));  // a call that never returns
      },
      ::testing::ExitedWithCode(3), "");
}

}  // namespace
}  // namespace gpudiag
