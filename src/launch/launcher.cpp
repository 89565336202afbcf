#include "launch/launcher.h"

#include <limits.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "launch/child.h"
#include "launch/job.h"
#include "launch/signal_pipe.h"
#include "launch/supervisor.h"
#include "util/error.h"

namespace gpudiag::launch {

namespace {

/// The running gpudiag binary: executed through /proc/self/exe (which works
/// even if the file was replaced since), named by its real path in argv[0].
constexpr const char* kSelf = "/proc/self/exe";

std::string self_name() {
  char buf[PATH_MAX];
  auto n = ::readlink(kSelf, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("gpudiag");
}

}  // namespace

int run_launch(const LaunchOptions& options, const Env& env, LaunchObserver* observer) {
  LaunchObserver no_observer;
  LaunchObserver& watcher = observer ? *observer : no_observer;

  SpawnSpec spec;
  if (options.no_gpudiag) {
    spec.path = find_program(options.command.front(), env);
    spec.argv = options.command;
  } else {
    spec.path = kSelf;
    spec.argv.push_back(self_name());
    spec.argv.insert(spec.argv.end(), options.command.begin(), options.command.end());
  }

  JobInfo job = resolve_job(options, env);
  watcher.on_job_start(job);
  spdlog::info("launch: ranks {}-{} of {} on this node (node {} of {}), master {}:{}",
               job.rank_of(0), job.rank_of(job.nproc_per_node - 1), job.world_size(), job.node_rank,
               job.nnodes, job.master_addr, job.master_port);
  if (job.master_port < 1 || job.master_port > 65535)
    throw Error(ExitCode::internal,
                "launch: the job's master port became " + std::to_string(job.master_port));

  // Before the first fork, so no SIGINT or SIGCHLD from here on is lost.
  SignalPipe signals;
  std::vector<RankProcess> ranks;
  ranks.reserve(static_cast<std::size_t>(job.nproc_per_node));
  for (int local = 0; local < job.nproc_per_node; ++local) {
    spec.envp = to_envp(rank_environment(env, job, local));
    ranks.push_back({job.rank_of(local), local, ChildProcess::spawn(spec)});
  }

  Supervisor supervisor(std::move(ranks), options.prefix,
                        {options.grace_s, options.kill_after_s, options.timeout_s,
                         effective_exit_timeout(options)},
                        watcher,
                        signals);
  return supervisor.run();
}

}  // namespace gpudiag::launch
