// gpudiag sweep: run by any launcher over a pool of nodes, one process per
// GPU; the ranks test every node on its own and in pairs (src/sweep), and rank
// 0 prints the verdict per node and writes the exclude list, the good
// hostfiles, the JSON document and the metrics file. Exit status: 0 when no
// node is to be excluded, 1 when some are, 3 when the sweep could not finish
// (rank 0, which plans it, was lost), 2 for a usage error.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>

#include "cli/commands.h"
#include "cli/json_output.h"
#include "cli/world_setup.h"
#include "comm/nccl_env.h"
#include "history/folder.h"
#include "history/tally.h"
#include "history/verdicts.h"
#include "launch/verdict_file.h"
#include "report/hostlist.h"
#include "report/prometheus.h"
#include "report/status_line.h"
#include "sweep/report.h"
#include "util/error.h"
#include "util/file_out.h"
#include "util/log.h"
#include "util/text.h"

namespace gpudiag::cli {

namespace {

struct SweepCli {
  sweep::SweepOptions sweep;
  std::string hosts;  ///< --hosts: the pool, as a hostlist
  std::string json_path, exclude_file, good_hostfile, good_mpi_hostfile, prometheus;
  std::string history;     ///< --history DIR, else GPUDIAG_HISTORY
  int exclude_history = 0;  ///< --exclude-history N (0: off)
  double history_days = 30;
};

/// --exclude-history: the hosts the history blames in N jobs or more of the
/// last --history-days, each with why. A folder not made yet holds nothing.
std::vector<std::pair<std::string, std::string>> history_left_out(const SweepCli& o) {
  if (o.exclude_history <= 0) return {};
  std::error_code ec;
  if (!std::filesystem::exists(o.history, ec)) return {};
  const auto folder = history::read_folder(o.history);
  if (folder.skipped)
    spdlog::warn("--history {}: {} file(s) skipped, not records (gpudiag history {} names them)",
                 clean_text(o.history), folder.skipped, clean_text(o.history));
  const std::string since =
      o.history_days > 0
          ? history::utc_time(std::time(nullptr) - static_cast<std::time_t>(o.history_days * 86400))
          : "";
  return history::hosts_at_fault(history::tally(folder.records, since), o.exclude_history, since);
}

/// The hosts the pool should have: --hosts, else SLURM's node list when its
/// names are the hosts' own (a cluster whose node names differ from host
/// names would otherwise see every node "missing").
std::vector<std::string> expected_hosts(const SweepCli& o, const Env& env, const std::string& me,
                                        std::vector<std::string>& warnings) {
  if (!o.hosts.empty()) return expand_slurm_hostlist(o.hosts);
  auto list = env.get("SLURM_JOB_NODELIST");
  if (!list || list->empty()) return {};
  try {
    auto hosts = expand_slurm_hostlist(*list);
    if (std::find(hosts.begin(), hosts.end(), me) != hosts.end()) return hosts;
    warnings.push_back("SLURM_JOB_NODELIST does not name this host (" + clean_text(me) +
                       "): nodes that never arrive are not named; pass --hosts");
  } catch (const Error& e) {
    // The variable is the environment's: printed escaped, on one line.
    warnings.push_back("SLURM_JOB_NODELIST: " + clean_text(e.one_line()));
  }
  return {};
}

/// Rank 0's files: each written whole, a failure one line and exit status 2.
int write_files(const SweepCli& o, const sweep::SweepOutcome& out) {
  int status = 0;
  auto put = [&](const std::string& option, const std::string& path, const std::string& text) {
    if (path.empty()) return;
    if (int s = write_output_file(option, path, text)) status = s;
  };
  put("--exclude-file", o.exclude_file, sweep::exclude_file_text(out));
  put("--good-hostfile", o.good_hostfile, sweep::good_hostfile_text(out, false));
  put("--good-mpi-hostfile", o.good_mpi_hostfile, sweep::good_hostfile_text(out, true));
  if (!o.prometheus.empty())
    if (int s = write_prometheus_file(o.prometheus, sweep::sweep_prometheus(out))) status = s;
  if (!o.json_path.empty())
    if (int s = emit_json(o.json_path, "gpudiag-sweep/1", sweep::sweep_json(out))) status = s;
  return status;
}

int run(SweepCli& o) {
  const Env env = Env::from_process();
  const auto settings = read_job_settings(env, o.sweep.timeout_s);
  // Through node leaders when the tree is on (GPUDIAG_TREE; sweep/tree_results.h);
  // under MPI, flat.
  auto job = join_job(settings, /*tree=*/true, /*mpi_tree=*/false);
  const auto& w = job.setup.world;
  set_log_tag("rank " + std::to_string(w.rank));
  for (const auto& warning : w.warnings) spdlog::warn("{}", warning);
  // Before NCCL's first call: its environment as the pairs' NCCL needs it.
  for (const auto& nw : prepare_nccl_env(env, NcclEnvUse::sweep))
    if (w.rank == 0) spdlog::warn("{}", nw.text);
  if (w.rank == 0) {
    check_file_target("--json", o.json_path, WriteMode::through);
    check_file_target("--exclude-file", o.exclude_file, WriteMode::through);
    check_file_target("--good-hostfile", o.good_hostfile, WriteMode::through);
    check_file_target("--good-mpi-hostfile", o.good_mpi_hostfile, WriteMode::through);
    check_file_target("--prometheus", o.prometheus, WriteMode::replace);
  }
  std::vector<std::string> notes;
  o.sweep.expected_hosts = expected_hosts(o, env, job.setup.host, notes);
  if (w.rank == 0)
    for (const auto& n : notes) spdlog::warn("{}", n);
  if (w.rank == 0) {  // the judge plans the rounds: it alone reads the history
    o.sweep.left_out = history_left_out(o);
    for (const auto& [host, why] : o.sweep.left_out)
      spdlog::warn("sweep: leaving out {}: {} (--exclude-history {})", clean_text(host), why,
                   o.exclude_history);
  }
  auto out = sweep::run_sweep(o.sweep, job.setup, settings.ring_address,
                             settings.store.token.value);
  if (!out.error.empty()) {
    spdlog::error("{}", out.error);
    if (job.mpi) job.mpi->abandon();
    return static_cast<int>(out.timed_out ? ExitCode::timeout : ExitCode::broken);
  }
  int status = out.excluded > 0 ? static_cast<int>(ExitCode::broken) : 0;
  const std::string verdict =
      out.excluded > 0 ? "sweep: " + std::to_string(out.excluded) +
                             (out.excluded == 1 ? " node" : " nodes") + " to exclude"
                       : "sweep: no node to exclude";
  if (w.rank == 0) {
    write_all(human_fd(o.json_path), sweep::sweep_text(out));
    if (int s = write_files(o, out)) status = s;
    if (!o.history.empty()) {  // one record per node; a failure to write changes no verdict
      const auto stamp = history::stamp_now(settings.store.token.value, settings.store.token.source);
      if (auto why = history::write_records(o.history, history::sweep_records(out, stamp, o.sweep.left_out));
          !why.empty())
        spdlog::warn("--history: {}; the verdict stands", why);
    }
  } else if (w.local_rank == 0) {
    // Every other node says where the report and files are.
    write_all(STDOUT_FILENO, verdict + "; the report" +
                                 (o.exclude_file.empty() && o.good_hostfile.empty() &&
                                          o.good_mpi_hostfile.empty() && o.json_path.empty()
                                      ? ""
                                      : " and files") +
                                 " are on " +
                                 (out.report_host.empty() ? "rank 0's node" : out.report_host) +
                                 " (rank 0)\n");
  }
  // Under gpudiag launch, exit 1 for nodes to exclude is this verdict, not a failure.
  if (status == static_cast<int>(ExitCode::broken)) launch::write_verdict(verdict);
  if (job.mpi && !job.mpi->barrier_within(Deadline::after_seconds(3))) job.mpi->abandon();
  return status;
}

}  // namespace

Runner setup_sweep(CLI::App& app) {
  auto o = std::make_shared<SweepCli>();
  auto* sub = app.add_subcommand(
      "sweep", "Over a pool of nodes (one rank per GPU): test every node alone and in pairs, "
               "name the nodes to exclude and write the exclude list (exit 1 when there are some)");
  auto& s = o->sweep;
  sub->add_option("--backend", s.backend, "auto: NCCL on GPUs, else host/tcp; nccl; host")
      ->check(CLI::IsMember({"auto", "nccl", "host"}))
      ->capture_default_str();
  sub->add_option("--size", s.bytes, "bytes each pair exchanges each way per measurement")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{4096}, std::uint64_t{4} << 30))
      ->default_str("64MiB on GPUs, 4MiB on the host backend");
  sub->add_option("--iters", s.iters, "timed exchanges per pair at most (the fastest is taken)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  sub->add_option("--timeout", s.timeout_s, "seconds any wait for the other ranks may take")
      ->check(Seconds(0.1, 86400.0))
      ->capture_default_str();
  sub->add_option("--pair-timeout", s.pair_timeout_s,
                  "seconds one pair's measurement may take before the pair counts as failed")
      ->check(Seconds(0.1, 86400.0))
      ->capture_default_str();
  sub->add_option("--time-budget", s.time_budget_s,
                  "seconds the sweep aims to finish in: more partners per node while it allows "
                  "(every node gets two at least)")
      ->check(Seconds(1.0, 7.0 * 86400))
      ->capture_default_str();
  sub->add_option("--hosts", o->hosts,
                  "the pool's hosts as a SLURM hostlist (node[001-064]): those whose ranks never "
                  "arrive are named MISSING (default: SLURM_JOB_NODELIST when it names this host)");
  sub->add_option("--device", s.device, "CUDA device ordinal (default: local rank)")
      ->check(DeviceOrdinal());
  sub->add_option("--mem", s.mem_bytes, "memory each rank pattern-tests before the rounds")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{4096}, std::uint64_t{1} << 40))
      ->default_str("256MiB on a GPU, 16MiB on the host backend");
  sub->add_option("--compute-seconds", s.compute_seconds,
                  "seconds of each rank's compute phase after its memory test (bf16, fp16, fp32 "
                  "GEMMs whose checksums are compared between ranks of one GPU model)")
      ->check(Seconds(0, 86400.0))
      ->default_str("1.5 on a GPU, 0.1 on the host backend");
  sub->add_flag("--no-compute", [o](std::int64_t) { o->sweep.compute = false; },
                "skip the compute phase")
      ->excludes("--compute-seconds");
  add_nccl_lib_option(sub, s.nccl_lib);
  sub->add_option("--exclude-file", o->exclude_file,
                  "rank 0 writes the nodes to exclude, as a hostlist for sbatch --exclude");
  sub->add_option("--good-hostfile", o->good_hostfile, "rank 0 writes the OK nodes, one per line");
  sub->add_option("--good-mpi-hostfile", o->good_mpi_hostfile,
                  "rank 0 writes the OK nodes as an mpirun hostfile (host slots=N)");
  sub->add_option("--prometheus", o->prometheus,
                  "rank 0 writes the verdicts and bandwidths in node_exporter's textfile format");
  add_json_option(sub, o->json_path, "rank 0 writes the sweep's report");
  add_history_option(sub, o->history);
  sub->add_option("--exclude-history", o->exclude_history,
                  "leave out of the rounds (FAILED, with why) the hosts that verdicts in the "
                  "--history folder blamed in N jobs or more (0: off)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  sub->add_option("--history-days", o->history_days,
                  "with --exclude-history: count the records of the last DAYS days (0: all)")
      ->type_name("DAYS")
      ->check(FiniteIn(0, 36500, "days"))
      ->capture_default_str();
  return [o] {
    o->history = read_history_dir(Env::from_process(), o->history);
    if (o->exclude_history > 0 && o->history.empty())
      throw UsageError("sweep: --exclude-history needs the history's folder",
                       "add --history DIR, or set GPUDIAG_HISTORY");
    return run(*o);
  };
}

}  // namespace gpudiag::cli
