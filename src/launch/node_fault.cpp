// node_fault(): see node_fault.h. The first rank (by local rank) whose death
// is the node's is named; the words are the exit status's own.
#include "launch/node_fault.h"

#include <csignal>

#include "hw/kernel_note.h"
#include "hw/evidence.h"

namespace gpudiag::launch {

bool node_signal(int signal) {
  return signal == SIGBUS || signal == SIGSEGV || signal == SIGILL || signal == SIGFPE ||
         signal == SIGKILL;
}

std::optional<std::string> node_fault(const std::vector<RankOutcome>& outcomes, int first_rank,
                                      const std::string& host,
                                      const std::function<bool(int)>& oom_killed) {
  for (std::size_t local = 0; local < outcomes.size(); ++local) {
    const auto& o = outcomes[local];
    if (!o.status || !o.status->signaled || o.killed_by_launcher || !node_signal(o.status->value))
      continue;
    const int l = static_cast<int>(local);
    if (o.status->value == SIGKILL && oom_killed && oom_killed(l)) continue;
    return "rank " + std::to_string(first_rank + l) + " [" + host + "-" + std::to_string(l) +
           "] was " + o.status->describe() + ", a signal it did not ask for" +
           (o.status->value == SIGKILL ? " (not the launcher's, and no OOM kill was seen)" : "");
  }
  return std::nullopt;
}

std::optional<std::string> node_class_evidence(const std::vector<std::string>& note_lines,
                                               const std::string& host) {
  for (const auto& line : note_lines)
    if (line.rfind("node: ", 0) == 0)
      return "the kernel log of " + host + " since the attempt started: " + line.substr(6);
  return std::nullopt;
}

std::optional<std::string> kernel_fault(std::uint64_t attempt_start_usec, const std::string& host,
                                        const std::string& kmsg) {
  hw::KernelNoteWindow w;
  w.at_usec = hw::usec_since_boot();
  w.job_start_usec = attempt_start_usec;
  w.before_s = w.at_usec > attempt_start_usec
                   ? static_cast<double>(w.at_usec - attempt_start_usec) / 1e6 + 1
                   : 1;
  return node_class_evidence(hw::kernel_note(w, kmsg).lines, host);
}

}  // namespace gpudiag::launch
