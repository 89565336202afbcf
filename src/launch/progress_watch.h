// Whether a job still makes progress, for --hang-timeout (docs/launch.md,
// "Which rank is the job waiting for"). Progress is, from any rank:
//   - output (the launcher's relay calls output());
//   - a Python rank's progress file changing: the startup hook's thread writes
//     there, twice a second at most, the default process group's sequence
//     number (ProcessGroup._get_sequence_number_for_group: DDP's all-reduces
//     are issued from C++, so counting Python calls would miss them) and a
//     hash of its main thread's stack by (file, function), the innermost line
//     aside;
//   - for a rank without that file (--no-python, a native program), its
//     native stack's summary (stacks.h summarise: where it is, past libc's
//     waits) differing between half the limit and the limit.
// CPU time is not progress: a rank waiting on a hung collective spins in
// CUDA's synchronisation and NCCL's proxy polls, a Python busy loop spins,
// and a healthy slow step may use little CPU. No progress for the limit is
// a hang when some rank waits for another (the launcher decides that from
// the stacks, wait_frames.h); when none does, it calls hold_off() and the
// watch answers again half the limit later if nothing progressed meanwhile.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpudiag::launch {

class ProgressWatch {
 public:
  using Clock = std::chrono::steady_clock;
  struct Rank {
    pid_t pid = 0;
    std::string progress_file;  ///< "" for a rank without the Python hook
  };

  explicit ProgressWatch(double limit_s) : limit_s_(limit_s) {}
  /// A rank printed something.
  void output() { progress(); }
  /// One pass over the live ranks; true once nothing progressed for the limit
  /// (and, after hold_off(), for another half of it since).
  bool hung(const std::vector<Rank>& live);
  double idle_s() const;
  /// After hung(): the next true comes `seconds` later at the earliest (the
  /// launcher's choice: half the limit when no rank waits for another, a
  /// moment to confirm when one does); progress resets it.
  void hold_off(double seconds);
  /// The default process group's sequence number last read from the rank's
  /// progress file: -1 none yet, nullopt not known (no file, no number).
  std::optional<long long> sequence(pid_t pid) const;

 private:
  void progress();
  std::map<pid_t, std::string> native_summaries(const std::vector<Rank>& live) const;

  double limit_s_;
  Clock::time_point last_ = Clock::now();
  std::map<std::string, std::string> seen_;   ///< progress file -> its last content
  std::map<pid_t, std::string> native_half_;  ///< native summaries at half the limit
  bool half_taken_ = false;
  std::optional<Clock::time_point> next_check_;    ///< set by hold_off()
  std::map<pid_t, std::optional<long long>> seq_;  ///< from the progress files
};

}  // namespace gpudiag::launch
