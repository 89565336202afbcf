#include "checks/watchdog.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpudiag {
namespace {

TEST(Watchdog, QuietWhenThePhaseEndsInTime) {
  Watchdog w("h-0");
  w.arm("device", Deadline::after(std::chrono::milliseconds(200)));
  w.disarm();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  SUCCEED();
}

// A phase that lasts says so (every period), naming the phase and its limit;
// the notices stop when it ends.
TEST(Watchdog, APhaseThatLastsSaysSo) {
  std::mutex m;
  std::vector<std::string> lines;
  Watchdog w("h-0");
  w.set_notices([&](const std::string& l) {
    std::lock_guard lock(m);
    lines.push_back(l);
  }, std::chrono::milliseconds(20));
  w.arm("device", Deadline::after_seconds(60));
  for (;;) {  // until two notices came: no guess of how long they take
    {
      std::lock_guard lock(m);
      if (lines.size() >= 2) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  w.disarm();
  std::lock_guard lock(m);
  EXPECT_EQ(lines[0].rfind("still in the device phase after ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(" (working, not hung: the rank is ended only if the phase lasts 60.00 s)"),
            std::string::npos)
      << lines[0];
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
