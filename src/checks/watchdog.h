// The last line of defence against a wait without a deadline: a call that
// cannot be given one (cudaMalloc on a hung GPU, a driver call stuck in the
// kernel) is watched from a second thread. If the phase it runs in outlives
// its limit, the watchdog writes the rank's status line itself ("is broken:
// stuck in device for 90 s ...") and ends the process with the timeout exit
// status, so the rank never hangs silently; its peers then see it gone.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "util/deadline.h"

namespace gpudiag {

class Watchdog {
 public:
  /// `label` is the status line's "[host-local]" part.
  explicit Watchdog(std::string label);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Watches `phase` until disarm() or the next arm(); fires after `limit`.
  /// `hint`, when given, replaces the generic "a hung GPU or driver?" part of
  /// the status line: what is likely stuck and what to check.
  void arm(const std::string& phase, Deadline limit, std::string hint = {});
  void disarm();

  /// For tests: "still in the PHASE phase" notices go to `sink`, every `every`
  /// (10 s by default, through the log).
  void set_notices(std::function<void(const std::string&)> sink, std::chrono::milliseconds every);

 private:
  void loop();

  std::string label_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string phase_, hint_;
  Deadline::Clock::time_point started_{}, limit_{};
  std::chrono::milliseconds notice_every_{10000};
  std::function<void(const std::string&)> notice_sink_;  ///< empty: spdlog
  Deadline::Clock::time_point notice_for_{}, next_notice_{};  ///< the phase a notice is due for, and when
  bool armed_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace gpudiag
