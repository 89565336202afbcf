// gpudiag bench: the check's setup (GPU, exchange, communicator, a verified
// all-reduce), then an all-reduce bandwidth sweep; rank 0 prints the table.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fstream>

#include "checks/check.h"
#include "cli/commands.h"
#include "cli/world_setup.h"
#include "report/bench_report.h"
#include "report/job_report.h"
#include "report/status_line.h"
#include "util/error.h"
#include "util/log.h"

namespace gpudiag::cli {

namespace {

struct BenchCli {
  CheckOptions check;
  std::uint64_t min_bytes = 1ull << 20, max_bytes = 256ull << 20;
  std::string json_path;
};

int run(BenchCli o) {
  if (o.min_bytes > o.max_bytes) throw UsageError("--min is larger than --max");
  for (std::uint64_t b = o.min_bytes; b <= o.max_bytes; b *= 2) o.check.sweep_bytes.push_back(b);
  o.check.mem_bytes = o.check.mem_bytes ? o.check.mem_bytes : 4096;
  o.check.large_bytes = std::min<std::uint64_t>(o.max_bytes, 16ull << 20);
  auto job = join_job(Env::from_process(), o.check.timeout_s);
  set_log_tag("rank " + std::to_string(job.setup.world.rank));
  CheckResult result = run_check(o.check, job.setup);
  // A benchmark prints results, not OK lines; a broken rank still says why.
  if (!result.me.ok) write_all(STDOUT_FILENO, status_line(result.me));
  job.meet_after_printing(result, o.check.timeout_s);
  if (result.me.rank == 0) {
    write_all(STDOUT_FILENO, versions_line(result));
    if (job_ok(result)) write_all(STDOUT_FILENO, bench_table(result));
    if (!o.json_path.empty()) {
      std::ofstream f(o.json_path);
      f << bench_json(result).dump(2) << "\n";
      if (!f) spdlog::error("could not write {}", o.json_path);
    }
  }
  return job.finish(result);
}

}  // namespace

Runner setup_bench(CLI::App& app) {
  auto o = std::make_shared<BenchCli>();
  o->check.iters = 20;
  auto* sub = app.add_subcommand(
      "bench", "All-reduce bandwidth sweep (like nccl-tests' all_reduce_perf) over the job");
  sub->add_option("--backend", o->check.backend, "auto | nccl | host")
      ->check(CLI::IsMember({"auto", "nccl", "host"}))
      ->capture_default_str();
  sub->add_option("--min", o->min_bytes, "smallest size")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{4}, std::uint64_t{16} << 30))
      ->default_str("1MiB");
  sub->add_option("--max", o->max_bytes, "largest size (sizes double from --min)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{4}, std::uint64_t{16} << 30))
      ->default_str("256MiB");
  sub->add_option("--iters", o->check.iters, "timed iterations per size")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  sub->add_option("--warmup", o->check.warmup, "untimed iterations per size")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  sub->add_option("--timeout", o->check.timeout_s, "seconds any wait for peers may take")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  sub->add_option("--device", o->check.device, "CUDA device ordinal (default: local rank)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--json", o->json_path, "write the results as JSON (rank 0)");
  return [o] { return run(*o); };
}

}  // namespace gpudiag::cli
