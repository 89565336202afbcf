#include "launch/signal_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace gpudiag::launch {

namespace {

// A signal handler can reach only globals; this one descriptor is the
// exception to "state is passed, not global", owned by the one SignalPipe.
std::atomic<int> g_write_fd{-1};

extern "C" void on_signal(int sig) {
  int saved = errno;
  int fd = g_write_fd.load();
  if (fd >= 0) {
    unsigned char byte = static_cast<unsigned char>(sig);
    [[maybe_unused]] auto n = ::write(fd, &byte, 1);
  }
  errno = saved;
}

/// The signals a SignalPipe takes over, in the order of SignalPipe::previous_.
// SIGUSR1: print where every rank is (its stack) and go on (supervisor.h).
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE, SIGUSR1};

}  // namespace

SignalPipe::SignalPipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    throw Error(ExitCode::internal, std::string("launch: pipe2(): ") + std::strerror(errno));
  read_.reset(fds[0]);
  write_.reset(fds[1]);
  int expected = -1;
  if (!g_write_fd.compare_exchange_strong(expected, write_.get()))
    throw Error(ExitCode::internal, "launch: a second SignalPipe in one process");
  static_assert(std::size(kSignals) == std::tuple_size_v<decltype(previous_)>);
  for (std::size_t i = 0; i < std::size(kSignals); ++i) {
    struct sigaction sa {};
    sa.sa_handler = kSignals[i] == SIGPIPE ? SIG_IGN : on_signal;
    sa.sa_flags = SA_RESTART | (kSignals[i] == SIGCHLD ? SA_NOCLDSTOP : 0);
    sigemptyset(&sa.sa_mask);
    ::sigaction(kSignals[i], &sa, &previous_[i]);
  }
}

SignalPipe::~SignalPipe() {
  for (std::size_t i = 0; i < std::size(kSignals); ++i)
    ::sigaction(kSignals[i], &previous_[i], nullptr);
  g_write_fd.store(-1);
}

std::vector<int> SignalPipe::drain() {
  std::vector<int> signals;
  unsigned char buf[64];
  for (;;) {
    auto n = ::read(read_.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    signals.insert(signals.end(), buf, buf + n);
  }
  return signals;
}

}  // namespace gpudiag::launch
