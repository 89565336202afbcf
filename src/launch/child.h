// ChildProcess: one rank's process, owned from fork to reap.
//
// spawn() starts a program with everything prepared before fork(), so the
// child runs only async-signal-safe calls until execve() (the launcher may
// have other threads, e.g. a store server). The child:
//   - leads its own process group, so signals reach the rank and whatever it
//     started, and a terminal's Ctrl-C reaches only the launcher, which
//     forwards it once;
//   - gets SIGKILL if the launcher dies (PR_SET_PDEATHSIG; note it fires when
//     the *thread* that spawned it ends, so spawn from a long-lived thread);
//   - has stdin on /dev/null and stdout/stderr on fresh pipes;
//   - starts with default dispositions for the signals the launcher handles
//     and an empty signal mask.
// An execve() failure comes back through a close-on-exec pipe and is thrown
// from spawn(), not discovered later as a mysterious exit status 127.
//
// try_reap() never blocks. When the rank's process has ended, it first kills
// what the rank left running in its process group (while the dead rank's pid
// still reserves the group id), then reaps it. The destructor of a child that
// was never reaped kills its group and waits a bounded time, so no zombie or
// orphan outlives the launcher on any path.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "launch/exit_status.h"
#include "store/socket.h"
#include "util/env.h"

namespace gpudiag::launch {

struct SpawnSpec {
  /// The file to execute (absolute, or relative to the working directory).
  std::string path;
  /// argv, argv[0] included.
  std::vector<std::string> argv;
  /// "NAME=value" strings.
  std::vector<std::string> envp;
};

class ChildProcess {
 public:
  /// Starts `spec`. Throws gpudiag::Error if the process cannot be created or
  /// the program cannot be executed (the message says which and why).
  static ChildProcess spawn(const SpawnSpec& spec);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  bool reaped() const { return reaped_; }
  /// The read ends of the child's stdout and stderr pipes (each once).
  net::Fd take_stdout() { return std::move(stdout_); }
  net::Fd take_stderr() { return std::move(stderr_); }

  /// Sends `signal` to the child's process group; does nothing once reaped.
  void signal(int signal) const;
  /// The exit status if the child has ended (reaping it and killing what it
  /// left in its process group); nullopt while it runs. Never blocks.
  std::optional<ExitStatus> try_reap();

 private:
  ChildProcess(pid_t pid, net::Fd out, net::Fd err)
      : pid_(pid), stdout_(std::move(out)), stderr_(std::move(err)) {}

  pid_t pid_ = -1;
  bool reaped_ = false;
  net::Fd stdout_;
  net::Fd stderr_;
};

/// Where `name` would be executed from, like execvp() with the PATH in `env`
/// (a name with a '/' is used as it is). Throws gpudiag::UsageError if it is
/// not an executable file.
std::string find_program(const std::string& name, const Env& env);

}  // namespace gpudiag::launch
