// The Supervisor's questions to NCCL's RAS (supervisor.h, launch/ras_note.h): asked on a
// thread of its own so that the loop goes on relaying output and reaping children while
// RAS gathers (it waits for slow processes up to its TIMEOUT); said when answered.
#include "launch/supervisor.h"

#include "launch/nccl_presence.h"

namespace gpudiag::launch {

std::unique_ptr<RasProbe> Supervisor::ask_ras(const std::string& why, double deadline_s) {
  const auto& plan = policy_.ras;
  if (plan.timeout_s <= 0 || !plan.settings.enabled || !plan.settings.problem.empty())
    return nullptr;
  auto ranks = local_ranks();
  // RAS listens only inside NCCL: a job whose ranks run none (gloo, MPI, a script
  // without collectives) is not asked, and nothing is said of it, unless
  // NCCL_RAS_ADDR names where to ask.
  std::vector<pid_t> pids;
  for (const auto& r : ranks) pids.push_back(r.pid);
  if (!plan.settings.named && !any_rank_maps_nccl(pids)) return nullptr;
  return std::make_unique<RasProbe>(plan, std::move(ranks), policy_.host, why, deadline_s);
}

void Supervisor::finish_ras(std::unique_ptr<RasProbe> probe) {
  std::vector<std::string> lines;
  if (!probe) {
    lines = ras_not_asked(policy_.ras);
  } else {
    // Bounded by the probe's deadline. A SIGUSR1 meanwhile is this report, as while stacks
    // are taken.
    const bool was = taking_stacks_;
    taking_stacks_ = true;
    while (!probe->done()) {
      reap();
      poll_once();
    }
    taking_stacks_ = was;
    lines = probe->lines();
  }
  if (lines.empty()) return;
  std::string text = lines.front();
  for (std::size_t i = 1; i < lines.size(); ++i) text += "\n" + lines[i];
  say(text);
}

void Supervisor::watch_ras() {
  if (failure_ras_ && failure_ras_->done()) finish_ras(std::move(failure_ras_));
}

}  // namespace gpudiag::launch
