// The progress watch of --hang-timeout (progress_watch.h) on real processes
// and files, against its own clock: a native rank is judged by its stack at
// half the limit and at the limit, so one that moved in between (a silent
// --no-python rank whose code goes on) is not hung, and one that stayed put
// is; a Python rank's progress file that changes is progress, one that does
// not is a hang. Each test drives the watch with passes until one starts
// past the point it needs (half the limit, the limit), as the launcher's loop
// does, and asserts the verdict of that pass; a child moves only when the
// test tells it to, and the test waits until its stack shows the move.
#include "launch/progress_watch.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <thread>

#include "launch/stacks.h"

namespace gpudiag::launch {
namespace {

using namespace std::chrono_literals;

/// A native rank in two places: `sh` blocked reading its stdin, then, once a
/// line arrives, `cat` blocked reading it (another program, so another stack).
class MovingRank {
 public:
  MovingRank() {
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[0], 0);
      ::close(fds[1]);
      if (FILE* null = std::freopen("/dev/null", "w", stdout); !null) ::_exit(126);
      ::execl("/bin/sh", "sh", "-c", "read x; exec cat", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[0]);
    in_ = fds[1];
  }
  ~MovingRank() {
    if (in_ >= 0) ::close(in_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  void move() { (void)!::write(in_, "\n", 1); }

 private:
  pid_t pid_ = -1;
  int in_ = -1;
};

std::string where(pid_t pid) {
  RankStack s = take_stack(pid, "");
  summarise(s);
  return s.frames.empty() ? std::string() : s.where;
}

/// Waits (30 s at most) until the rank's stack reads and differs from `not_this`.
std::string wait_for_stack(pid_t pid, const std::string& not_this) {
  const auto until = std::chrono::steady_clock::now() + 30s;
  std::string w;
  while (std::chrono::steady_clock::now() < until) {
    w = where(pid);
    if (!w.empty() && w != not_this) return w;
    std::this_thread::sleep_for(20ms);
  }
  return w == not_this ? std::string() : w;
}

/// Passes over `live` until one starts at `at` seconds of silence or later;
/// that pass's verdict. `started`: the silence the pass started at.
bool pass_from(ProgressWatch& w, const std::vector<ProgressWatch::Rank>& live, double at,
               double& started) {
  for (;;) {
    started = w.idle_s();
    const bool hung = w.hung(live);
    if (started >= at) return hung;
    std::this_thread::sleep_for(10ms);
  }
}

constexpr double kLimit = 3.0;

/// A native rank sitting where it is (sh reading its stdin); empty when this
/// machine cannot read a stack (no eu-stack or gdb, ptrace refused).
std::string settled(const MovingRank& rank) {
  if (rank.pid() <= 0) return {};
  return wait_for_stack(rank.pid(), "");
}

TEST(ProgressWatch, ANativeRankThatMovedSinceHalfTheLimitIsNotHung) {
  MovingRank rank;
  const std::string before_move = settled(rank);
  if (before_move.empty()) GTEST_SKIP() << "no native stack can be read here";
  const std::vector<ProgressWatch::Rank> live{{rank.pid(), ""}};
  // The pass at half the limit must start before the limit: a machine too
  // loaded for that gets a fresh watch.
  std::unique_ptr<ProgressWatch> w;
  double started = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    w = std::make_unique<ProgressWatch>(kLimit);
    EXPECT_FALSE(pass_from(*w, live, kLimit / 2, started));
    if (started < kLimit) break;
  }
  ASSERT_LT(started, kLimit) << "no pass started between half the limit and the limit";
  rank.move();
  ASSERT_NE(wait_for_stack(rank.pid(), before_move), "") << "the rank did not move";
  // At the limit its stack differs from the one at half: progress, not a hang.
  EXPECT_FALSE(pass_from(*w, live, kLimit, started))
      << "a native rank that moved since half the limit was called hung";
}

TEST(ProgressWatch, ANativeRankThatStayedPutIsHungAtTheLimit) {
  MovingRank rank;
  if (settled(rank).empty()) GTEST_SKIP() << "no native stack can be read here";
  ProgressWatch w(kLimit);
  const std::vector<ProgressWatch::Rank> live{{rank.pid(), ""}};
  double started = 0;
  EXPECT_TRUE(pass_from(w, live, kLimit, started));
  // Output is progress, whatever the stacks say.
  w.output();
  EXPECT_FALSE(w.hung(live));
}

TEST(ProgressWatch, AProgressFileThatChangesIsProgressOneThatDoesNotIsAHang) {
  char dir[] = "/tmp/gpudiag-progress-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/progress";
  auto write = [&](const std::string& text) { std::ofstream(file) << text; };
  write("7 1234");
  const std::vector<ProgressWatch::Rank> live{{::getpid(), file}};
  const double limit = 1.0;
  ProgressWatch w(limit);
  EXPECT_FALSE(w.hung(live));  // the first content read is progress
  // A new sequence number seen by a pass at the limit: not a hang.
  while (w.idle_s() < limit) std::this_thread::sleep_for(10ms);
  write("8 1234");
  EXPECT_FALSE(w.hung(live));
  // Nothing changes after that: hung at the limit.
  double started = 0;
  EXPECT_TRUE(pass_from(w, live, limit, started));
  std::remove(file.c_str());
  ::rmdir(dir);
}

}  // namespace
}  // namespace gpudiag::launch
