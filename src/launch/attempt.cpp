// run_attempt() (attempt.h): one attempt on this node. It resolves the job,
// lets the observer settle it (store, rendezvous), plans the rank log files
// (attempt_files.cpp), gives each rank its environment (torch's flight
// recorder, the Python hook's stack and progress files, a gpudiag
// subcommand's verdict file, --stragglers' address), spawns the ranks and
// supervises them (supervisor.h). After a failure it says the root cause
// (root_cause.h: the rank that raised on its own, not a peer's victim) and
// what the ranks' flight recorder holds, tells the restart policy the
// cause's exception (or where a hung job stood), and says whether this node
// was at fault (node_fault.h:
// a signal its rank did not ask for, node-class evidence in the kernel log).
#include "launch/attempt.h"

#include <fcntl.h>
#include <limits.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hw/evidence.h"
#include "launch/child.h"
#include "launch/entry.h"
#include "launch/error_file.h"
#include "launch/flight_recorder_note.h"
#include "launch/job.h"
#include "launch/memory_evidence.h"
#include "launch/node_fault.h"
#include "launch/python_hook.h"
#include "launch/ras_note.h"
#include "launch/restart_policy.h"
#include "launch/root_cause.h"
#include "launch/rounds.h"
#include "launch/signal_pipe.h"
#include "launch/supervisor.h"
#include "stragglers/exchange.h"
#include "stragglers/rank_hook.h"
#include "stragglers/watch.h"
#include "util/error.h"
#include "util/file_out.h"
#include "world/host.h"

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

/// torchrun's ChildFailedError root cause, with the rank that failed first
/// (not the earliest timestamp, which names a rank that failed because of it
/// when both fail within a second): its exception and where the traceback is;
/// for a ReplicaDivergence, which every rank raises, the rank its message names.
void say_root_cause(const JobInfo& job, int local, const std::string& error_dir, bool python,
                    const std::optional<ExitStatus>& how, pid_t pid, long oom_kills_at_start) {
  if (local < 0) return;
  const std::string who = "rank " + std::to_string(job.rank_of(local)) + " [" + short_hostname() +
                          "-" + std::to_string(local) + "]";
  // A SIGKILL is most often the OOM killer: say what the memory counters saw.
  if (how && how->signaled && how->value == SIGKILL) {
    launcher_say("root cause: " + who + " was killed by SIGKILL; " +
                 sigkill_memory_note(pid, oom_kills_at_start));
    return;
  }
  if (error_dir.empty()) return;
  const std::string path = error_dir + "/" + std::to_string(local) + "/error.json";
  const auto e = read_child_error(path);
  if (!e && !python) return;  // a program that is not Python writes none
  if (!e) {
    if (how && !how->signaled)
      launcher_say(
          "root cause: " + who + " " + how->describe() +
          " without raising an exception (sys.exit, "
          "os._exit, or a crash below Python): torch's @record writes an error file only for "
          "an exception");
    else
      launcher_say(
          "root cause: " + who + " failed first (" + (how ? how->describe() : "?") +
          ") and wrote no error file (torch's @record on its entry function writes one for an "
          "exception)");
    return;
  }
  // Every replica raises the same ReplicaDivergence: the rank it names is the
  // cause, not the first to exit.
  if (const Divergence d = replica_divergence(e->message); d.diverged) {
    std::string culprit = "the replicas";
    if (d.rank >= 0) {
      culprit = "rank " + std::to_string(d.rank);
      const int node_local = d.rank - job.rank_of(0);
      if (node_local >= 0 && node_local < job.nproc_per_node)
        culprit += " [" + short_hostname() + "-" + std::to_string(node_local) + "]";
    }
    launcher_say("root cause: " + culprit +
                 (d.rank >= 0 ? " holds parameters that differ from the other "
                                "replicas' (silent data corruption?): "
                              : " diverged, and no majority names one: ") +
                 e->message + "\n  (raised on every rank; read from " + who + "'s error file)" +
                 (e->where.empty() ? "" : "\n  at " + e->where) + "\n  traceback: " + path);
    return;
  }
  launcher_say("root cause: " + who + " raised " + e->message +
               (e->where.empty() ? "" : "\n  at " + e->where) + "\n  traceback: " + path);
}

}  // namespace

Attempt run_attempt(const LaunchOptions& options, const Env& env, LaunchObserver& watcher,
                    int restart, double timeout_s, LogPlan& logs) {
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
  job.restart_count = restart;
  // Known before the rendezvous: a torch program using the agent store keeps
  // the endpoint's store as its master there (store_host.h).
  job.agent_store = options.torch_children && uses_agent_store(options);
  watcher.on_job_start(job);
  if (job.node_rank < 0 || job.node_rank >= job.nnodes)
    throw Error(ExitCode::internal, "launch: the job's node rank became " +
                                        std::to_string(job.node_rank) + " of " +
                                        std::to_string(job.nnodes));
  spdlog::info("launch: ranks {}-{} of {} on this node (node {} of {}), master {}:{}",
               job.rank_of(0), job.rank_of(job.nproc_per_node - 1), job.world_size(), job.node_rank,
               job.nnodes, job.master_addr, job.master_port);
  if (job.master_port < 1 || job.master_port > 65535)
    throw Error(ExitCode::internal,
                "launch: the job's master port became " + std::to_string(job.master_port));
  if (restart == 0) logs = plan_logs(options, job);
  const auto attempt_dir = logs.base + "/attempt_" + std::to_string(restart);
  std::unique_ptr<stragglers::Watch> straggler_watch;  // --stragglers (src/stragglers/)
  std::unique_ptr<stragglers::Exchange> straggler_exchange;  // its other nodes' arrivals
  if (options.torch_children) {
    job.torch_children = true;
    job.agent_store = uses_agent_store(options);
    const std::string async =
        async_error_variable(options.no_python ? "" : torch_version_for(options.command.front()));
    job.async_error_variable = async;
    if (!env.has("OMP_NUM_THREADS") && job.nproc_per_node > 1) {
      job.omp_num_threads = "1";
      if (restart == 0)
        launcher_say("setting OMP_NUM_THREADS=1 for each rank, as torchrun does, so " +
                     std::to_string(job.nproc_per_node) +
                     " ranks do not overload the CPUs; set it yourself to tune it");
    }
    job.error_dir = error_root(logs, job, logs.error_made) + "/attempt_" + std::to_string(restart);
    if (options.python_entry && options.stack_hook) {
      const std::string hook = error_root(logs, job, logs.error_made) + "/python-hook";
      write_python_hook(hook);
      if (options.stragglers) {
        stragglers::write_rank_hook(hook);
        straggler_watch = std::make_unique<stragglers::Watch>(
            stragglers::WatchSettings{hook, job.nproc_per_node, job.rank_of(0), job.world_size(),
                                      short_hostname(), options.prometheus, job.node_rank,
                                      job.nnodes});
        if (Store* store = job.nnodes > 1 ? watcher.shared_store() : nullptr)
          straggler_exchange = std::make_unique<stragglers::Exchange>(
              *store, *straggler_watch,
              stragglers::ExchangeSettings{job.restart_count, job.node_rank, job.nnodes});
      }
      const std::string path = env.get_or("PYTHONPATH", "");
      job.extra_env.emplace_back("PYTHONPATH", path.empty() ? hook : hook + ":" + path);
    }
    for (int local = 0; local < job.nproc_per_node; ++local) {
      std::error_code ec;
      std::filesystem::create_directories(job.error_dir + "/" + std::to_string(local), ec);
      if (ec)
        throw UsageError("launch: cannot create " + job.error_dir + ": " + ec.message(),
                         "give --log-dir a folder this user may write");
    }
  }
  if (!logs.base.empty())
    launcher_say("rank logs go to " + attempt_dir + "/<local rank>/{stdout,stderr}.log");

  // Before the first fork, so no SIGINT or SIGCHLD from here on is lost.
  SignalPipe signals;
  RasPlan ras_plan;
  ras_plan.timeout_s = options.nccl_ras_timeout_s;
  std::vector<RankProcess> ranks;
  ranks.reserve(static_cast<std::size_t>(job.nproc_per_node));
  for (int local = 0; local < job.nproc_per_node; ++local) {
    std::shared_ptr<LogFile> out_log, err_log;
    bool out_console = true, err_console = true;
    if (!logs.base.empty()) {
      const auto dir = attempt_dir + "/" + std::to_string(local);
      const int files = logs.to_files(local), quiet = logs.console_only_not(local);
      if (files & kStdOut) out_log = open_log(dir, "stdout.log");
      if (files & kStdErr) err_log = open_log(dir, "stderr.log");
      out_console = !(quiet & kStdOut);
      err_console = !(quiet & kStdErr);
    }
    // --local-ranks-filter: the other ranks' output stays off the console.
    if (!options.console_ranks.empty() &&
        std::find(options.console_ranks.begin(), options.console_ranks.end(), local) ==
            options.console_ranks.end())
      out_console = err_console = false;
    Env child_env = rank_environment(env, job, local);
    // Where the ranks' NCCL serves RAS: their own environment says (rank 0's stands for all).
    if (local == 0) ras_plan.settings = ras::ras_settings(child_env);
    // A torch program's NCCL flight recorder, as the fleets run it: on, dumping
    // at a watchdog timeout into the run's folder, unless the user chose.
    if (job.torch_children && !job.error_dir.empty()) {
      auto keep_or = [&](const char* name, const std::string& value) {
        if (!env.has(name)) child_env.set(name, value);
      };
      keep_or("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000");
      keep_or("TORCH_NCCL_DUMP_ON_TIMEOUT", "1");
      keep_or("TORCH_NCCL_ENABLE_TIMING", "1");
      keep_or("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", flight_recorder_prefix(job));
    }
    std::string stack_file, progress_file;
    if (options.python_entry && options.stack_hook && !job.error_dir.empty()) {
      stack_file = job.error_dir + "/" + std::to_string(local) + "/stack.txt";
      child_env.set("GPUDIAG_STACK_FILE", stack_file);
      child_env.set("GPUDIAG_ERROR_HOOK_PID", "");  // the rank claims it (python_hook.cpp)
      if (options.hang_timeout_s > 0) {  // the hook's progress thread runs only when asked
        progress_file = job.error_dir + "/" + std::to_string(local) + "/progress";
        child_env.set("GPUDIAG_PROGRESS_FILE", progress_file);
      }
    }
    // A gpudiag subcommand says when its exit 1 is a verdict (verdict_file.h).
    std::string verdict_file;
    if (!options.no_gpudiag && !options.python_entry) {
      const std::string dir = error_root(logs, job, logs.error_made) + "/attempt_" +
                              std::to_string(restart) + "/" + std::to_string(local);
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (!ec) {
        verdict_file = dir + "/verdict";
        child_env.set("GPUDIAG_VERDICT_FILE", verdict_file);
      }
    }
    if (straggler_watch) child_env.set("GPUDIAG_STRAGGLERS", straggler_watch->address());
    spec.envp = to_envp(child_env);
    ranks.push_back({job.rank_of(local), local, ChildProcess::spawn(spec), std::move(out_log),
                     std::move(err_log), out_console, err_console, false, stack_file, progress_file,
                     verdict_file});
    // A bench's report is rank 0's stdout, in nccl-tests' layout: it goes out
    // as nccl-tests' own would under mpirun, with no prefix on its rows.
    const std::string& program = options.command.empty() ? std::string() : options.command.front();
    ranks.back().bare_stdout =
        job.rank_of(local) == 0 &&
        (options.no_gpudiag ? program.ends_with("_perf") : program == "bench");
  }

  const long oom_at_start = oom_kill_count();
  const auto kernel_at_start = hw::usec_since_boot();
  // On a terminal, once: how to ask where the ranks are while the job runs.
  if (restart == 0 && ::isatty(STDERR_FILENO) == 1)
    launcher_say("pid " + std::to_string(::getpid()) + " (kill -USR1 " +
                 std::to_string(::getpid()) + " prints where every rank is; the job goes on)");
  StopPolicy policy{
      options.grace_s,
      options.kill_after_s,
      timeout_s,
      effective_exit_timeout(options),
      options.hang_timeout_s,
      job.error_dir.empty() ? (logs.base.empty() ? std::string() : attempt_dir) : job.error_dir,
      short_hostname(),
      ras_plan};
  policy.world_size = job.world_size();
  policy.timeout_given_s = options.timeout_s;
  Supervisor supervisor(std::move(ranks), options.prefix, policy, watcher, signals);
  Attempt out;
  out.status = supervisor.run();
  if (options.stragglers) {  // the end summary's verdicts, and --json's
    if (straggler_exchange) straggler_exchange->finish();  // the other nodes' last records
    const auto report = straggler_watch ? straggler_watch->finish() : stragglers::unmeasured();
    for (std::size_t i = 0; i < report.lines.size(); ++i)
      i == 0 ? launcher_say(report.lines[i]) : stragglers::say_line(report.lines[i]);
    watcher.on_stragglers(report.json);
  }
  if (out.status != 0 && job.torch_children) {
    // The first to exit, unless it failed of a peer's failure and a rank
    // that raised on its own is the cause (root_cause.h).
    const int first = supervisor.first_failed_local_rank();
    const auto outcomes = supervisor.outcomes();
    const RootCause cause = root_cause(first, outcomes, job.error_dir);
    if (cause.local == first || cause.local < 0) {
      say_root_cause(job, first, job.error_dir, options.python_entry,
                     supervisor.first_failure_status(), supervisor.first_failed_pid(),
                     oom_at_start);
    } else {
      say_root_cause(job, cause.local, job.error_dir, options.python_entry,
                     outcomes[static_cast<std::size_t>(cause.local)].status, 0, oom_at_start);
      launcher_say("  (rank " + std::to_string(job.rank_of(first)) +
                   " ended first, of a peer's failure seen from it: " + cause.first_words + ")");
    }
    if (const int named = cause.local; named >= 0) {  // the restart policy's word on it
      out.error = attempt_error(
          job.rank_of(named), outcomes[static_cast<std::size_t>(named)].status,
          read_child_error(job.error_dir + "/" + std::to_string(named) + "/error.json"));
      if (out.error) out.error->local = named;
    }
  }
  if (supervisor.hang_point()) out.error = supervisor.hang_point();  // where it hung
  // The ranks' flight-recorder dumps (torch wrote them at its watchdog's
  // timeout), read as `gpudiag fr` reads them.
  if (out.status != 0 && job.torch_children) {
    const std::string dir = job.error_dir + "/flight-recorder";
    const auto lines = flight_recorder_findings(dir);
    if (!lines.empty()) {
      std::string text = "the ranks' NCCL flight recorder (gpudiag fr " + dir + "):";
      for (const auto& l : lines) text += "\n  " + l;
      launcher_say(text);
    }
  }
  out.restartable = supervisor.restartable();
  out.failure = supervisor.failure();
  if (out.status != 0)
    out.node_fault =
        node_fault(supervisor.outcomes(), job.rank_of(0), short_hostname(), [&](int l) {
          return oom_kill_seen(
              l == supervisor.first_failed_local_rank() ? supervisor.first_failed_pid() : 0,
              oom_at_start);
        }).value_or("");
  if (out.status != 0 && out.node_fault.empty())  // node-class evidence in the kernel log
    out.node_fault = kernel_fault(kernel_at_start, short_hostname()).value_or("");
  return out;
}

}  // namespace gpudiag::launch
