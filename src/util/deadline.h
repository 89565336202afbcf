// A point in time by which a wait must end. Every blocking call in gpudiag
// (socket I/O, rendezvous, MPI and NCCL polling, stream syncs) takes one.
#pragma once

#include <algorithm>
#include <chrono>

namespace gpudiag {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline after(std::chrono::milliseconds d) { return Deadline(Clock::now() + d); }
  static Deadline after_seconds(double s) {
    return after(std::chrono::milliseconds(static_cast<long long>(s * 1000.0)));
  }
  static Deadline at(Clock::time_point t) { return Deadline(t); }

  bool expired() const { return Clock::now() >= when_; }
  std::chrono::milliseconds remaining() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(when_ - Clock::now());
    return std::max(left, std::chrono::milliseconds(0));
  }
  /// Milliseconds for poll(2): the time left, capped so loops can re-check state.
  int poll_ms(int cap_ms = 1000) const {
    return static_cast<int>(std::min<long long>(remaining().count(), cap_ms));
  }
  /// The earlier of this deadline and `other`.
  Deadline min(Deadline other) const { return Deadline(std::min(when_, other.when_)); }
  Clock::time_point when() const { return when_; }

 private:
  explicit Deadline(Clock::time_point t) : when_(t) {}
  Clock::time_point when_;
};

/// Seconds elapsed since `start`, for phase timings.
inline double seconds_since(Deadline::Clock::time_point start) {
  return std::chrono::duration<double>(Deadline::Clock::now() - start).count();
}

}  // namespace gpudiag
