// gpudiag check: every rank tests its GPU and the network to its peers, and
// prints one status line; rank 0 adds the versions line and the job summary.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fstream>

#include "checks/check.h"
#include "cli/commands.h"
#include "cli/world_setup.h"
#include "report/job_report.h"
#include "report/status_line.h"
#include "util/error.h"
#include "util/log.h"

namespace gpudiag::cli {

namespace {

struct CheckCli {
  CheckOptions check;
  std::string json_path;
};

int exit_code_for(const RankRecord& me) {
  if (me.ok) return static_cast<int>(ExitCode::ok);
  return static_cast<int>(me.timed_out ? ExitCode::timeout : ExitCode::broken);
}

int run(const CheckCli& o) {
  auto job = join_job(Env::from_process(), o.check.timeout_s);
  set_log_tag("rank " + std::to_string(job.setup.world.rank));
  for (const auto& w : job.setup.world.warnings) spdlog::warn("{}", w);

  CheckResult result = run_check(o.check, job.setup);
  write_all(STDOUT_FILENO, status_line(result.me));
  // Everyone has printed before rank 0 adds the summary below the lines.
  job.plane->gather_all("report", "", Deadline::after_seconds(result.me.ok ? o.check.timeout_s : 3));
  if (result.me.rank == 0) {
    write_all(STDOUT_FILENO, versions_line(result) + summary_table(result));
    if (!o.json_path.empty()) {
      std::ofstream f(o.json_path);
      f << job_json(result).dump(2) << "\n";
      if (!f) spdlog::error("could not write the JSON report to {}", o.json_path);
    }
  }
  job.finish(result.me.ok && job_ok(result));
  return exit_code_for(result.me);
}

}  // namespace

Runner setup_check(CLI::App& app) {
  auto o = std::make_shared<CheckCli>();
  auto* sub = app.add_subcommand(
      "check", "Each rank tests its GPU memory, then NCCL all-reduce and barrier with its peers, "
               "and prints its OK line");
  sub->add_option("--backend", o->check.backend,
                  "auto: NCCL on GPUs, else host memory; nccl; host")
      ->check(CLI::IsMember({"auto", "nccl", "host"}))
      ->capture_default_str();
  sub->add_option("--mem", o->check.mem_bytes, "memory each rank allocates and pattern-tests")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{4096}, std::uint64_t{1} << 40))
      ->default_str("256MiB on a GPU, 16MiB on the host backend");
  sub->add_option("--size", o->check.large_bytes, "size of the large all-reduce")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{4096}, std::uint64_t{16} << 30))
      ->default_str("32MiB");
  sub->add_option("--iters", o->check.iters, "timed iterations of the large all-reduce")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  sub->add_option("--timeout", o->check.timeout_s,
                  "seconds any wait for peers may take before they are reported")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  sub->add_option("--device", o->check.device, "CUDA device ordinal (default: local rank)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--json", o->json_path, "write the job report as JSON (rank 0)");
  return [o] { return run(*o); };
}

}  // namespace gpudiag::cli
