// gpudiag bench: the check's setup (GPU, exchange, communicator, a verified
// all-reduce), then an all-reduce bandwidth sweep, or with --links the link
// test (every pair of ranks); rank 0 prints the table.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fstream>

#include "checks/check.h"
#include "cli/commands.h"
#include "cli/json_output.h"
#include "cli/world_setup.h"
#include "report/bench_report.h"
#include "report/job_report.h"
#include "report/link_report.h"
#include "report/status_line.h"
#include "util/error.h"
#include "util/log.h"
#include "world/fingerprint_compare.h"

namespace gpudiag::cli {

namespace {

struct BenchCli {
  CheckOptions check;
  std::uint64_t min_bytes = 1ull << 20, max_bytes = 256ull << 20;
  std::string json_path;
  bool links = false;
  std::uint64_t link_bytes = 32ull << 20;
  double step_factor = 0;       ///< -f: sizes multiply by this (0: not given)
  std::uint64_t step_bytes = 0;  ///< -i: sizes grow by this when -f is not given
};

/// The sweep's sizes, as nccl-tests steps them: from min to max multiplying
/// by -f, else adding -i, else doubling (gpudiag's default). At most 4096.
std::vector<std::uint64_t> sweep_sizes(const BenchCli& o) {
  constexpr std::size_t kMaxSizes = 4096;
  std::vector<std::uint64_t> out;
  const double factor = o.step_factor > 0 ? o.step_factor : (o.step_bytes ? 0 : 2);
  for (std::uint64_t b = o.min_bytes; b <= o.max_bytes;) {
    out.push_back(b);
    if (out.size() > kMaxSizes)
      throw UsageError("-b/-e/-f/-i make more than 4096 sizes",
                       "raise -f or -i, or narrow -b and -e");
    const std::uint64_t next =
        factor > 0 ? static_cast<std::uint64_t>(static_cast<double>(b) * factor) : b + o.step_bytes;
    if (next <= b) break;  // a factor that rounds to no growth: the size is done
    b = next;
  }
  return out;
}

int run(BenchCli o) {
  if (o.min_bytes > o.max_bytes) throw UsageError("--min is larger than --max");
  if (o.step_factor > 0 && o.step_factor <= 1)
    throw UsageError("-f/--stepfactor " + fmt::format("{}", o.step_factor) + " does not grow the size",
                     "give a factor above 1, e.g. -f 2, or -i BYTES for equal steps");
  if (o.links)
    o.check.link_bytes = o.link_bytes;
  else
    o.check.sweep_bytes = sweep_sizes(o);
  o.check.mem_bytes = o.check.mem_bytes ? o.check.mem_bytes : 4096;
  // The check's own all-reduce still verifies the job; its timing is the
  // sweep's business, so with --links it stays small.
  o.check.large_bytes = std::min<std::uint64_t>(o.links ? 1ull << 20 : o.max_bytes, 16ull << 20);
  auto job = join_job(Env::from_process(), o.check.timeout_s);
  set_log_tag("rank " + std::to_string(job.setup.world.rank));
  CheckResult result = run_check(o.check, job.setup);
  int json_status = 0;
  const int out = human_fd(o.json_path);  // stderr when the JSON takes stdout
  // A benchmark prints results, not OK lines; a broken rank still says why.
  if (!result.me.ok) write_all(out, status_line(result.me));
  job.meet_after_printing(result, o.check.timeout_s);
  bool slow_links = false;
  if (result.me.rank == 0) {
    write_all(out, versions_line(result));
    // A failed job gets the check's job report: who failed, where, and why.
    nlohmann::json json = job_json(result);
    const char* schema = kCheckSchema;
    if (job_ok(result) && o.links) {
      auto verdict = link_verdict(result);
      slow_links = verdict.slow_links > 0;
      write_all(out, link_table(result, verdict));
      json = link_json(result, verdict);
      schema = kLinksSchema;
    } else if (job_ok(result)) {
      write_all(out, bench_table(result));
      json = bench_json(result);
      schema = kBenchSchema;
    }
    // What differs between the ranks may explain a slow or failed run.
    write_all(out, render_fingerprint(result.fingerprint));
    if (!o.json_path.empty()) json_status = emit_json(o.json_path, schema, json);
  }
  int status = job.finish(result);
  if (status == 0) status = json_status;
  // A slow link is a finding, like nccl-log's problems: rank 0 says so in its status.
  return status == 0 && slow_links ? static_cast<int>(ExitCode::broken) : status;
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
  sub->add_option("-b,--minbytes,--min", o->min_bytes, "smallest size (nccl-tests' -b)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{4}, std::uint64_t{16} << 30))
      ->default_str("1MiB");
  sub->add_option("-e,--maxbytes,--max", o->max_bytes,
                  "largest size (sizes double from --min unless -f or -i)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{4}, std::uint64_t{16} << 30))
      ->default_str("256MiB");
  sub->add_option("-f,--stepfactor", o->step_factor, "sizes multiply by this factor (above 1)")
      ->check(CLI::Range(1.0, 1024.0));
  sub->add_option("-i,--stepbytes", o->step_bytes, "sizes grow by this many bytes (without -f)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{16} << 30));
  sub->add_option("-n,--iters", o->check.iters, "timed iterations per size")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  sub->add_option("-w,--warmup_iters,--warmup", o->check.warmup, "untimed iterations per size")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  sub->add_option("-T,--timeout", o->check.timeout_s, "seconds any wait for peers may take")
      ->check(Seconds(0.1, 86400.0))
      ->capture_default_str();
  sub->add_option("--device", o->check.device, "CUDA device ordinal (default: local rank)")
      ->check(CLI::NonNegativeNumber);
  add_nccl_lib_option(sub, o->check.nccl_lib);
  sub->add_flag(
      "--links", o->links,
      "instead of the sweep: every pair of ranks exchanges --link-size both ways at once; "
      "a matrix of link bandwidths and the slow links, with the rank or host they share "
      "(exit 1 if any)");
  sub->add_option("--link-size", o->link_bytes, "bytes each pair exchanges per iteration")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{4}, std::uint64_t{4} << 30))
      ->default_str("32MiB");
  sub->add_option("--link-schedule", o->check.link_schedule,
                  "rounds: the disjoint pairs of a round at once; serial: one pair at a time; "
                  "auto: serial when a host has more ranks than CPUs")
      ->check(CLI::IsMember({"auto", "rounds", "serial"}))
      ->capture_default_str();
  add_json_option(sub, o->json_path, "rank 0 writes the results (the job report if it failed)");
  return [o] { return run(*o); };
}

}  // namespace gpudiag::cli
