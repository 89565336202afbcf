// SignalPipe: SIGINT, SIGTERM, SIGHUP and SIGCHLD as readable bytes on a pipe, so the
// launcher's poll() loop wakes for them like for any other input (the
// classic self-pipe). A handler, unlike signalfd, works whichever thread the
// kernel picks, so other threads in the launcher need not block signals.
//
// While a SignalPipe lives, SIGPIPE is ignored: a reader of the launcher's
// stdout that goes away (`| head`) must not kill the launcher and leave the
// job without its supervisor. The previous dispositions come back on
// destruction. Only one SignalPipe may exist at a time.
#pragma once

#include <array>
#include <csignal>
#include <vector>

#include "store/socket.h"

namespace gpudiag::launch {

class SignalPipe {
 public:
  SignalPipe();
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  /// The read end: poll it for POLLIN.
  int fd() const { return read_.get(); }
  /// The signals that arrived since the last call, in arrival order.
  std::vector<int> drain();

 private:
  net::Fd read_;
  net::Fd write_;
  using Action = struct sigaction;
  /// What SIGINT, SIGTERM, SIGHUP, SIGCHLD and SIGPIPE did before (kSignals order).
  std::array<Action, 6> previous_{};
};

}  // namespace gpudiag::launch
