// How a child process ended, in the words and numbers a user expects:
// "exited with status 1", "killed by SIGKILL", and the shell's convention for
// an exit status (the code, or 128 + the signal).
#pragma once

#include <string>

namespace gpudiag::launch {

struct ExitStatus {
  /// True when a signal ended the process; `value` is then the signal number.
  bool signaled = false;
  /// The exit code, or the signal number when `signaled`.
  int value = 0;
  bool core_dumped = false;

  /// Decodes a waitpid() status.
  static ExitStatus from_wait_status(int status);
  static ExitStatus exited(int code) { return {false, code, false}; }
  static ExitStatus killed(int signal) { return {true, signal, false}; }

  bool ok() const { return !signaled && value == 0; }
  /// The exit code, or 128 + signal, as a shell reports it.
  int shell_status() const { return signaled ? 128 + value : value; }
  /// "exited with status 1", "killed by SIGKILL", "killed by SIGSEGV (core dumped)".
  std::string describe() const;

  bool operator==(const ExitStatus&) const = default;
};

/// "SIGTERM" for 15; "signal 42" for one without a short name.
std::string signal_name(int signal);

}  // namespace gpudiag::launch
