#include "checks/watchdog.h"

#include <unistd.h>

#include "report/status_line.h"
#include "util/error.h"
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

void Watchdog::disarm() {
  std::lock_guard lock(mu_);
  armed_ = false;
}

void Watchdog::loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (!armed_) {
      cv_.wait(lock);
      continue;
    }
    if (cv_.wait_until(lock, limit_) == std::cv_status::timeout && armed_ && !stop_ &&
        Deadline::Clock::now() >= limit_) {
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
