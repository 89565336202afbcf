// What supervisor.cpp and supervisor_hang.cpp share (supervisor.h): a rank's
// slot (its process, output relays, exit status and what the launcher did to
// it) and the wording of durations and rank lists. Not for use outside them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "launch/supervisor.h"

namespace gpudiag::launch {

namespace supervisor_detail {

/// How long the first node's launcher waits for the others' stacks.
constexpr auto kStacksFromNodes = std::chrono::seconds(15);

inline std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

inline std::string ranks_phrase(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + format_ranks(ranks);
}

}  // namespace supervisor_detail

struct Supervisor::Slot {
  int rank;
  int local_rank;
  ChildProcess child;
  Relay out;
  Relay err;
  std::optional<ExitStatus> status;
  bool first_failure = false;
  bool stopped_by_launcher = false;
  /// Every signal the launcher sent it, one bit per signal number.
  std::uint64_t sent_signals = 0;
  std::optional<Deadline> exit_by;  ///< set when its status line went through
  bool hung_on_exit = false;
  std::string stack_file;
  std::string progress_file;
  std::string verdict_file;
  std::string verdict;  ///< its exit 1 was this verdict (verdict_file.h)

  void send(int sig) {
    child.signal(sig);
    if (sig > 0 && sig < 64) sent_signals |= std::uint64_t{1} << sig;
  }
  bool killed_by_launcher() const {
    return status && status->signaled && status->value > 0 && status->value < 64 &&
           (sent_signals >> status->value & 1);
  }
};

}  // namespace gpudiag::launch
