#include "launch/child.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <thread>

#include "util/deadline.h"
#include "util/error.h"

namespace gpudiag::launch {
namespace {

ExitStatus wait_for(ChildProcess& child) {
  auto deadline = Deadline::after(std::chrono::seconds(10));
  while (!deadline.expired()) {
    if (auto status = child.try_reap()) return *status;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ADD_FAILURE() << "child did not end in 10 s";
  return {};
}

/// True while `pid` runs (a zombie waiting for init to reap it counts as gone).
bool alive(pid_t pid) {
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return false;
  char state = 'X';
  int ignored_pid;
  [[maybe_unused]] int n = std::fscanf(f, "%d (%*[^)]) %c", &ignored_pid, &state);
  std::fclose(f);
  return state != 'Z' && state != 'X';
}

std::string read_all(net::Fd fd) {
  std::string out;
  char buf[256];
  for (ssize_t n; (n = ::read(fd.get(), buf, sizeof buf)) > 0;) out.append(buf, n);
  return out;
}

SpawnSpec shell(const std::string& script) {
  return {"/bin/sh", {"sh", "-c", script}, {"GREETING=hello", "PATH=/usr/bin:/bin"}};
}

TEST(ChildProcess, RunsWithTheGivenEnvironmentAndPipes) {
  auto child = ChildProcess::spawn(shell("echo $GREETING; echo oops >&2; exit 3"));
  auto out = child.take_stdout();
  auto err = child.take_stderr();
  EXPECT_EQ(wait_for(child), ExitStatus::exited(3));
  EXPECT_EQ(read_all(std::move(out)), "hello\n");
  EXPECT_EQ(read_all(std::move(err)), "oops\n");
}

TEST(ChildProcess, LeadsItsOwnProcessGroup) {
  auto child = ChildProcess::spawn(shell("sleep 30"));
  EXPECT_EQ(::getpgid(child.pid()), child.pid());
  child.signal(SIGTERM);
  EXPECT_EQ(wait_for(child), ExitStatus::killed(SIGTERM));
}

TEST(ChildProcess, ReapingKillsWhatTheChildLeftBehind) {
  // The child starts a background sleeper and exits; the sleeper must not outlive it.
  auto child = ChildProcess::spawn(shell("sleep 30 & echo $!"));
  auto out = child.take_stdout();
  EXPECT_TRUE(wait_for(child).ok());
  auto pid = std::stoi(read_all(std::move(out)));
  auto deadline = Deadline::after(std::chrono::seconds(5));
  while (alive(pid) && !deadline.expired())
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(alive(pid)) << "background process " << pid << " survived its rank";
}

TEST(ChildProcess, ReportsAProgramThatCannotRun) {
  try {
    ChildProcess::spawn({"/nonexistent/program", {"program"}, {}});
    FAIL() << "spawn() should have thrown";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot run '/nonexistent/program'"), std::string::npos);
  }
}

TEST(ChildProcess, DestructorKillsAndReaps) {
  pid_t pid;
  {
    auto child = ChildProcess::spawn(shell("sleep 30"));
    pid = child.pid();
  }
  EXPECT_NE(::kill(pid, 0), 0);  // reaped: not even a zombie
}

TEST(FindProgram, SearchesPath) {
  Env env(std::map<std::string, std::string>{{"PATH", "/nonexistent:/bin:/usr/bin"}});
  EXPECT_EQ(find_program("sh", env).substr(find_program("sh", env).rfind('/')), "/sh");
  EXPECT_THROW(find_program("no-such-program-xyz", env), UsageError);
  EXPECT_THROW(find_program("/etc/passwd", env), UsageError);
}

}  // namespace
}  // namespace gpudiag::launch
