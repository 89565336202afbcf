// WaitNotice: when it speaks, in which style, and what it says.
#include "util/progress.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace gpudiag {
namespace {

using namespace std::chrono_literals;

/// Polls for `for_ms`, like a wait's loop; returns the lines said.
std::vector<std::string> run(bool terminal, std::chrono::milliseconds for_ms) {
  std::vector<std::string> lines;
  {
    WaitNotice n([] { return "1 of 2 nodes at node0:29400"; }, Deadline::after_seconds(600), 20ms);
    n.redirect([&](const std::string& l) { lines.push_back(l); }, terminal);
    const auto end = Deadline::after(for_ms);
    while (!end.expired()) {
      n.poll();
      std::this_thread::sleep_for(1ms);
    }
  }
  return lines;
}

TEST(WaitNotice, AShortWaitSaysNothing) {
  EXPECT_TRUE(run(true, 5ms).empty());
  EXPECT_TRUE(run(false, 5ms).empty());
  // Nor the first poll of a wait with the default period (10 s).
  std::vector<std::string> lines;
  WaitNotice n([] { return "x"; }, Deadline::after_seconds(60));
  n.redirect([&](const std::string& l) { lines.push_back(l); }, true);
  n.poll();
  EXPECT_TRUE(lines.empty());
}

TEST(WaitNotice, ATerminalHearsEveryPeriodALogHearsTheStartAndTheEnd) {
  const auto tty = run(true, 110ms);
  ASSERT_GE(tty.size(), 2u);
  EXPECT_NE(tty[0].find("waiting for 1 of 2 nodes at node0:29400 for "), std::string::npos) << tty[0];
  EXPECT_NE(tty[0].find("; giving up in 59"), std::string::npos) << tty[0];
  const auto log = run(false, 110ms);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].rfind("waiting for 1 of 2 nodes", 0), 0u) << log[0];
  EXPECT_EQ(log[1].rfind("waited ", 0), 0u) << log[1];
}

}  // namespace
}  // namespace gpudiag
