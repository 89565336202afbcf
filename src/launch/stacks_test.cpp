// Reading faulthandler's and eu-stack's dumps, and naming the rank the others wait for.
#include "launch/stacks.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace gpudiag::launch {
namespace {

const char* kRank1 = R"(Thread 0x00007f1 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007f2 (most recent call first):
  File "/work/train.py", line 44 in main
  File "/usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 346 in wrapper
  File "/work/train.py", line 60 in <module>
)";

const char* kRank0 = R"(Current thread 0x00007f3 (most recent call first):
  File "/usr/lib/python3/dist-packages/torch/autograd/__init__.py", line 197 in backward
  File "/usr/lib/python3/dist-packages/torch/_tensor.py", line 488 in backward
  File "/work/train.py", line 49 in main
  File "/work/train.py", line 60 in <module>
)";

TEST(Stacks, PythonDumpsAreSummarisedByTheirOwnCode) {
  RankStack one;
  one.rank = 1, one.local_rank = 1, one.host = "n1", one.source = "python";
  one.frames = python_frames(kRank1);
  ASSERT_EQ(one.frames.size(), 3u);
  summarise(one);
  EXPECT_EQ(one.where, "in train.py:44 in main");
  EXPECT_FALSE(one.waiting);
  std::vector<RankStack> all{one};
  for (int r : {0, 2, 3}) {
    RankStack w;
    w.rank = r, w.local_rank = r, w.host = "n1", w.source = "python";
    w.frames = python_frames(kRank0);
    summarise(w);
    EXPECT_EQ(w.where, "wait in backward (__init__.py:197) from train.py:49 in main");
    all.push_back(w);
  }
  EXPECT_EQ(group_stacks(all),
            (std::vector<std::string>{"the others wait for rank 1",
                                      "rank 1 [n1-1] is in train.py:44 in main",
                                      "ranks 0,2,3 wait in backward (__init__.py:197) from train.py:49 in main"}));
}

// Two ranks: the one not waiting while the other waits is half the job, and
// still the one the other waits for. Two ranks both busy, or both waiting,
// blame nobody.
TEST(Stacks, OfTwoRanksTheOneNotWaitingIsWaitedFor) {
  RankStack busy, waiting;
  busy.rank = 1, busy.local_rank = 1, busy.host = "n1", busy.source = "python";
  busy.frames = python_frames(kRank1);
  summarise(busy);
  waiting.rank = 0, waiting.host = "n1", waiting.source = "python";
  waiting.frames = python_frames(kRank0);
  summarise(waiting);
  const auto lines = group_stacks({waiting, busy});
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "the others wait for rank 1");
  EXPECT_EQ(lines[1], "rank 1 [n1-1] is in train.py:44 in main");
  RankStack other = busy;
  other.rank = 0, other.local_rank = 0, other.where = "in train.py:50 in main";
  for (const auto& pair : {std::vector<RankStack>{other, busy}, std::vector<RankStack>{waiting, waiting}}) {
    auto both = pair;
    both[1].rank = 1;
    for (const auto& line : group_stacks(both))
      EXPECT_EQ(line.find("the others wait for"), std::string::npos) << line;
  }
}

TEST(Stacks, NativeFramesOfTheMainThread) {
  const char* eu = R"(PID 42 - process
TID 43:
#0  0x00007f00 epoll_wait
TID 42:
#0  0x00007f01 __futex_abstimed_wait_common
#1  0x00007f02 pthread_cond_timedwait
#2  0x00005501 gpudiag::wait_for_link(int)
#3  0x00005502 main
)";
  RankStack s;
  s.source = "eu-stack";
  s.frames = native_frames(eu, 42);
  ASSERT_EQ(s.frames.size(), 4u);
  summarise(s);
  EXPECT_EQ(s.where, "wait in gpudiag::wait_for_link");
  EXPECT_TRUE(s.waiting);
  RankStack none;
  none.error = "neither eu-stack (elfutils) nor gdb is installed";
  summarise(none);
  EXPECT_EQ(none.where, "no stack (neither eu-stack (elfutils) nor gdb is installed)");
}

TEST(Stacks, GdbThreadsAndFramesAreReadToo) {
  const char* gdb = R"(Thread 2 (Thread 0x7f00 (LWP 77) "python3"):
#0  0x00007f00 in epoll_wait () from /lib/libc.so.6
Thread 1 (Thread 0x7f01 (LWP 76) "python3"):
#0  __futex_abstimed_wait_common (futex_word=0x1) at futex-internal.c:57
#1  0x00007f02 in c10d::ProcessGroupGloo::AsyncWork::wait () from libtorch.so
#2  0x00005502 in main ()
)";
  EXPECT_EQ(native_frames(gdb, 76),
            (std::vector<std::string>{"__futex_abstimed_wait_common",
                                      "c10d::ProcessGroupGloo::AsyncWork::wait", "main"}));
  EXPECT_EQ(native_frames(gdb, 77), (std::vector<std::string>{"epoll_wait"}));
}

TEST(Stacks, AFrameWithoutASymbolIsNamedByItsFileAndOffset) {
  // A stripped binary (Debian's sleep) as eu-stack and gdb show it.
  const char* eu = R"(PID 42 - process
TID 42:
#0  0x00007efcb8617503 clock_nanosleep@GLIBC_2.2.5
#1  0x000055c7b7c374af
#2  0x00007f0000000010
)";
  const char* gdb = R"(Thread 1 (Thread 0x7f01 (LWP 42) "sleep"):
#0  __GI___clock_nanosleep (clock_id=0) at clock_nanosleep.c:71
#1  0x000055c7b7c374af in ?? ()
)";
  const std::string maps =
      "55c7b7c31000-55c7b7c33000 r--p 00000000 08:01 123    /usr/bin/sleep\n"
      "55c7b7c33000-55c7b7c39000 r-xp 00002000 08:01 123    /usr/bin/sleep\n"
      "7efcb8500000-7efcb8700000 r-xp 00026000 08:01 456    /usr/lib/x86_64-linux-gnu/libc.so.6\n"
      "7ffde2240000-7ffde2261000 rw-p 00000000 00:00 0      [stack]\n"
      "garbage line\n";
  for (const char* text : {eu, gdb}) {
    RankStack s;
    s.frames = native_frames(text, 42);
    name_addresses(s.frames, maps);
    ASSERT_GE(s.frames.size(), 2u);
    EXPECT_EQ(s.frames[1], "sleep+0x64af");
    summarise(s);
    EXPECT_EQ(s.where, "in sleep+0x64af");
  }
  std::vector<std::string> unmapped{"0x00007f0000000010", "main"};
  name_addresses(unmapped, maps);  // nothing mapped there: the address stays
  EXPECT_EQ(unmapped, (std::vector<std::string>{"0x00007f0000000010", "main"}));
}

// A rank's dump is its own text: a line of any length (a long argument in a
// frame, a corrupt dump) is read in bounded time and stack, never by a
// recursive matcher (std::regex overflowed its stack near 30,000 characters).
TEST(Stacks, HugeLinesAreCutNotRecursedInto) {
  const std::string long_name(2'000'000, 'x');
  const std::string py = "Current thread 0x1 (most recent call first):\n  File \"" + long_name +
                         "\", line 3 in " + long_name + "\n  File \"train.py\", line 9 in <module>\n";
  const auto frames = python_frames(py);
  ASSERT_EQ(frames.size(), 1u);  // the cut line no longer parses as a frame
  EXPECT_EQ(frames[0], "train.py:9 in <module>");
  const std::string native = "TID 5:\n#0  0x0 " + long_name + "\n#1  0x1 main\n" +
                             std::string(3'000'000, '#') + "\n";
  const auto nf = native_frames(native, 5);
  ASSERT_EQ(nf.size(), 2u);
  EXPECT_EQ(nf[0].size(), 4096u - 8);  // "#0  0x0 " then the name, cut with the line
  EXPECT_EQ(nf[1], "main");
}

TEST(Stacks, OnlyAProcessCatchingSigusr2IsSentIt) {
  // The rank's startup file has not installed its handler yet, or finalization
  // took it away: SIGUSR2 would end the process (a healthy rank killed by a
  // request for its stack). Its stack comes from eu-stack instead.
  const pid_t child = ::fork();
  if (child == 0) {
    ::execlp("sleep", "sleep", "60", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(child, 0);
  const std::string dump = testing::TempDir() + "/stacks-usr2-" + std::to_string(child) + ".txt";
  std::ofstream(dump).put('\n');
  // The child has exec'd once /proc shows sleep's image (its handlers reset).
  for (int i = 0; i < 500; ++i) {
    std::ifstream comm("/proc/" + std::to_string(child) + "/comm");
    std::string name;
    if (std::getline(comm, name) && name == "sleep") break;
    ::usleep(10000);
  }
  EXPECT_FALSE(catches_signal(child, SIGUSR2));
  take_stack(child, dump);
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, WNOHANG), 0) << "the process ended: status " << status;
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  std::remove(dump.c_str());
}

TEST(Stacks, AHandlerInstalledNowIsSeen) {
  struct sigaction sa {}, old {};
  sa.sa_handler = [](int) {};
  ASSERT_EQ(::sigaction(SIGUSR2, &sa, &old), 0);
  EXPECT_TRUE(catches_signal(::getpid(), SIGUSR2));
  ::sigaction(SIGUSR2, &old, nullptr);
  EXPECT_FALSE(catches_signal(::getpid(), SIGUSR2));
  EXPECT_FALSE(catches_signal(::getpid(), SIGUSR2, "/nonexistent"));
}

}  // namespace
}  // namespace gpudiag::launch
