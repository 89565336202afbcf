#include "checks/watchdog.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>

#include "util/error.h"
#include "util/fd_write.h"
#include "util/strings.h"

namespace gpudiag {

Watchdog::Watchdog(std::string label) : label_(std::move(label)), thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::arm(const std::string& phase, Deadline limit, std::string hint) {
  std::lock_guard lock(mu_);
  phase_ = phase;
  hint_ = std::move(hint);
  started_ = Deadline::Clock::now();
  limit_ = limit.when();
  armed_ = true;
  cv_.notify_all();
}

void Watchdog::set_notices(std::function<void(const std::string&)> sink,
                           std::chrono::milliseconds every) {
  std::lock_guard lock(mu_);
  notice_sink_ = std::move(sink);
  notice_every_ = every;
  notice_for_ = {};
  cv_.notify_all();
}

void Watchdog::disarm() {
  std::lock_guard lock(mu_);
  armed_ = false;
}

void Watchdog::loop() {
  std::unique_lock lock(mu_);
  const bool terminal = ::isatty(STDERR_FILENO) == 1;
  while (!stop_) {
    if (!armed_) {
      cv_.wait(lock);
      continue;
    }
    // A phase that lasts (a large memory test, a slow link) says so after
    // 10 s: every 10 s on a terminal, once in a log (util/progress.h's rule).
    const auto armed_at = started_;
    if (notice_for_ != armed_at) notice_for_ = armed_at, next_notice_ = armed_at + notice_every_;
    const auto wake = std::min(limit_, next_notice_);
    const bool timed_out = cv_.wait_until(lock, wake) == std::cv_status::timeout;
    if (timed_out && armed_ && !stop_ && started_ == armed_at &&
        Deadline::Clock::now() >= next_notice_ && Deadline::Clock::now() < limit_) {
      const std::string line =
          "still in the " + phase_ + " phase after " + human_seconds(seconds_since(started_)) +
          " (working, not hung: the rank is ended only if the phase lasts " +
          human_seconds(std::chrono::duration<double>(limit_ - started_).count()) + ")";
      if (notice_sink_) notice_sink_(line);
      else spdlog::warn("{}", line);
      next_notice_ = terminal || notice_sink_ ? next_notice_ + notice_every_ : limit_;
      continue;
    }
    if (timed_out && armed_ && !stop_ && Deadline::Clock::now() >= limit_) {
      double stuck = seconds_since(started_);
      const std::string why =
          hint_.empty() ? " (a call that cannot time out did not return: a hung GPU or driver?); "
                          "try: nvidia-smi, and dmesg for Xid errors"
                        : " (" + hint_ + ")";
      write_all(STDOUT_FILENO, "[" + label_ + "] is broken: stuck in " + phase_ + " for " +
                                   human_seconds(stuck) + why + "\n");
      _exit(static_cast<int>(ExitCode::timeout));
    }
  }
}

}  // namespace gpudiag
