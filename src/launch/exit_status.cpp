#include "launch/exit_status.h"

#include <sys/wait.h>

#include <csignal>

namespace gpudiag::launch {

ExitStatus ExitStatus::from_wait_status(int status) {
  if (WIFSIGNALED(status)) return {true, WTERMSIG(status), static_cast<bool>(WCOREDUMP(status))};
  return {false, WIFEXITED(status) ? WEXITSTATUS(status) : 0, false};
}

std::string ExitStatus::describe() const {
  if (!signaled) return "exited with status " + std::to_string(value);
  return "killed by " + signal_name(value) + (core_dumped ? " (core dumped)" : "");
}

std::string signal_name(int signal) {
  // The signals a launcher meets; sigabbrev_np() would need glibc 2.32.
  struct Name {
    int number;
    const char* name;
  };
  static constexpr Name kNames[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
      {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
      {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
      {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
  };
  for (const auto& n : kNames)
    if (n.number == signal) return n.name;
  return "signal " + std::to_string(signal);
}

}  // namespace gpudiag::launch
