// node_fault(): see node_fault.h. The first rank (by local rank) whose death
// is the node's is named; the words are the exit status's own.
#include "launch/node_fault.h"

#include <csignal>

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

}  // namespace gpudiag::launch
