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

void install(int sig, void (*handler)(int), int flags, struct sigaction* old) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  ::sigaction(sig, &sa, old);
}

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
  install(SIGINT, on_signal, SA_RESTART, &old_int_);
  install(SIGTERM, on_signal, SA_RESTART, &old_term_);
  install(SIGCHLD, on_signal, SA_RESTART | SA_NOCLDSTOP, &old_chld_);
  install(SIGPIPE, SIG_IGN, 0, &old_pipe_);
}

SignalPipe::~SignalPipe() {
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
  ::sigaction(SIGCHLD, &old_chld_, nullptr);
  ::sigaction(SIGPIPE, &old_pipe_, nullptr);
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
