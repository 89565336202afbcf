// A line about a wait that can last, so nobody stares at a silent terminal
// for a minute (a rank waiting for a peer that never comes, a launcher waiting
// for the other nodes). On a terminal: after the first 10 s, and every 10 s
// after, "waiting for WHAT, giving up in N s"; in a log (stderr not a
// terminal): one line after the first 10 s and one when the wait ends, so a
// log shows the wait without a line every 10 s. A wait that ends within 10 s
// says nothing. Lines go through spdlog at info level or above (warn), so
// --log-level error silences them.
#pragma once

#include <functional>
#include <string>

#include "util/deadline.h"

namespace gpudiag {

class WaitNotice {
 public:
  /// `what` is called when a line is due ("1 of 2 nodes at node0:29400 (rdzv
  /// id job42)"), so it can say what is still missing then.
  WaitNotice(std::function<std::string()> what, Deadline give_up,
             std::chrono::milliseconds every = std::chrono::seconds(10));
  ~WaitNotice();
  WaitNotice(const WaitNotice&) = delete;
  WaitNotice& operator=(const WaitNotice&) = delete;

  /// Call in the wait's loop; cheap when no line is due.
  void poll();

  /// For tests: lines go to `sink` instead of the log, and `terminal` decides
  /// the style.
  void redirect(std::function<void(const std::string&)> sink, bool terminal);

 private:
  std::function<std::string()> what_;
  Deadline give_up_;
  std::chrono::milliseconds every_;
  Deadline::Clock::time_point start_, next_;
  bool terminal_ = false, said_ = false;
  std::function<void(const std::string&)> sink_;
};

}  // namespace gpudiag
