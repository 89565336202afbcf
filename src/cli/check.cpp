// gpudiag check: every rank tests its GPU and the network to its peers, and
// prints one status line; rank 0 adds the versions line and the job summary.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>

#include "checks/check.h"
#include "cli/commands.h"
#include "cli/json_output.h"
#include "cli/world_setup.h"
#include "comm/nccl_env.h"
#include "comm/nccl_roots.h"
#include "history/folder.h"
#include "history/verdicts.h"
#include "nccl_log/capture.h"
#include "nccl_log/render.h"
#include "report/compute_report.h"
#include "report/expected_bw_job.h"
#include "report/job_report.h"
#include "report/prom_reports.h"
#include "report/status_line.h"
#include "world/fingerprint_compare.h"
#include "util/error.h"
#include "util/file_out.h"
#include "util/log.h"

namespace gpudiag::cli {

namespace {

struct CheckCli {
  CheckOptions check;
  std::string json_path;
  std::string prometheus;  ///< --prometheus PATH (report/prom_reports.h)
  std::string nccl_debug;  ///< "", "info" or "trace"
  std::vector<std::string> nccl_debug_subsys;
  std::string nccl_debug_dir;
  std::optional<double> expect_busbw;  ///< GB/s; else the table (report/expected_bw.h)
  int table_rows = 256;     ///< past this many ranks, the table on the output is short
  std::string table_file;   ///< --table-file PATH: rank 0 writes every rank's row there
  std::string history;      ///< --history DIR, else GPUDIAG_HISTORY (history/folder.h)
};

/// --nccl-debug: every rank points NCCL's log at its own file in one run
/// directory, set in its own environment before NCCL starts (so it holds on
/// every node, whatever the launcher forwards). Rank 0 names the directory
/// and tells the others at an extra checkpoint.
std::optional<nccl_log::CapturePlan> start_nccl_capture(const CheckCli& o, Job& job) {
  if (o.nccl_debug.empty()) return std::nullopt;
  const auto& w = job.setup.world;
  if (o.check.backend == "host") {  // NCCL never runs: no directory, one line
    if (w.rank == 0) spdlog::warn("{}", nccl_log::not_used_notice("host"));
    return std::nullopt;
  }
  std::string dir = o.nccl_debug_dir.empty()
                        ? nccl_log::default_run_dir(job.setup.env, std::chrono::system_clock::now()).string()
                        : std::filesystem::absolute(o.nccl_debug_dir).string();
  auto agreed = job.plane->gather_all("nccl-debug", dir,
                                      Deadline::after_seconds(o.check.timeout_s), {0}, {0});
  if (agreed.records[0]) dir = *agreed.records[0];
  nccl_log::CaptureRequest req;
  req.run_dir = dir;
  req.level = o.nccl_debug;
  req.subsys = o.nccl_debug_subsys;
  req.host = job.setup.host;
  req.pid = getpid();
  req.rank = w.rank;
  auto plan = nccl_log::prepare_capture(req);
  nccl_log::apply_capture(plan);
  // A notice, not a warning: nothing may be wrong.
  if (w.rank == 0) spdlog::info("--nccl-debug: NCCL logs of every rank go to {}", plan.run_dir.string());
  return plan;
}

/// Rank 0's reading of the captured logs, below the job summary.
void summarize_nccl_capture(int out, const nccl_log::CapturePlan& plan, const CheckResult& result) {
  if (result.me.backend != "nccl") {  // --backend auto chose the host: run() removed the dir
    spdlog::warn("{}", nccl_log::not_used_notice(result.me.backend));
    return;
  }
  // NCCL never started anywhere (not found, no GPU, a failure before its
  // first call): there are no logs to read, and the folder goes.
  std::error_code ec;
  if (!std::filesystem::exists(plan.run_dir, ec) || std::filesystem::is_empty(plan.run_dir, ec)) {
    nccl_log::discard_capture(plan);
    write_all(out, "--nccl-debug: no rank wrote an NCCL log (NCCL did not start: see the ranks' "
                   "lines above), so there is nothing to explain\n");
    return;
  }
  try {
    auto report = nccl_log::summarize({plan.run_dir.string()});
    write_all(out, "\nNCCL logs in " + plan.run_dir.string() + " (gpudiag nccl-log " +
                                 plan.run_dir.string() + " reads them again):\n" +
                                 nccl_log::render_text(report));
  } catch (const Error& e) {
    write_all(out, "nccl-log: " + e.one_line() + "\n");
  }
}


int run(const CheckCli& o) {
  auto job = join_job(read_job_settings(Env::from_process(), o.check.timeout_s));
  set_log_tag("rank " + std::to_string(job.setup.world.rank));
  // Rank 0 writes the --json file: a path it cannot write ends the job now.
  if (job.setup.world.rank == 0) {
    check_file_target("--json", o.json_path, WriteMode::through);
    check_file_target("--prometheus", o.prometheus, WriteMode::replace);
    check_file_target("--table-file", o.table_file, WriteMode::through);
  }
  for (const auto& w : job.setup.world.warnings) spdlog::warn("{}", w);
  // Before NCCL's first call: its environment as gpudiag's NCCL needs it.
  for (const auto& w : prepare_nccl_env(job.setup.env, NcclEnvUse::check))
    if (job.setup.world.rank == 0) spdlog::warn("{}", w.text);
  auto capture = start_nccl_capture(o, job);

  CheckResult result = run_check(o.check, job.setup);
  int json_status = 0;
  const int out = human_fd(o.json_path);  // stderr when the JSON takes stdout
  write_all(out, status_line(result.me));
  // Everyone has printed before rank 0 adds the summary below the lines.
  job.meet_after_printing(result, o.check.timeout_s);
  // A rank whose NCCL never logged leaves nothing; the run folder goes with
  // the last such rank (discard_capture removes only empty folders).
  if (capture && (result.me.backend != "nccl" || !std::filesystem::exists(capture->log_file)))
    nccl_log::discard_capture(*capture);
  bool slow_busbw = false;
  if (result.me.rank == 0) {
    nlohmann::json json = job_json(result);
    std::string expected;
    // What the all-reduce should have reached on this hardware; a job that
    // failed has no timing to judge.
    if (job_ok(result)) {
      const auto verdict = check_busbw_verdict(result, o.expect_busbw);
      slow_busbw = verdict.failed();
      expected = verdict_line(verdict, "");
      json["expected_busbw"] = verdict_json(verdict);
    }
    // At scale the output holds the counts and the ranks that are not OK;
    // every row goes to --table-file (and --json).
    const std::string full_at =
        !o.table_file.empty() ? o.table_file : !o.json_path.empty() ? "--json" : "";
    write_all(out, versions_line(result) + summary_table(result, o.table_rows, full_at) +
                       compute_report(result).text() + expected +
                       render_fingerprint(result.fingerprint));
    if (!o.table_file.empty())
      if (int s = write_file("--table-file", o.table_file, summary_table(result),
                             WriteMode::through))
        json_status = s;
    if (capture) summarize_nccl_capture(out, *capture, result);
    if (!o.json_path.empty()) json_status = emit_json(o.json_path, kCheckSchema, json);
    if (int s = write_report_prometheus(o.prometheus, kCheckSchema, json,
                                        result.me.backend == "nccl" ? result.me.nccl_version : ""))
      json_status = s;
    if (!o.history.empty()) {  // one record per host; a failure to write changes no verdict
      const auto token = read_job_token(job.setup.env);
      const auto why = history::write_records(
          o.history, history::check_records(result, history::stamp_now(token.value, token.source),
                                            history::local_nics()));
      if (!why.empty()) spdlog::warn("--history: {}; the verdict stands", why);
    }
  }
  int status = job.finish(result);
  if (status == 0) status = json_status;
  // Far below what the hardware should reach is a finding, like bench's slow links.
  return status == 0 && slow_busbw ? static_cast<int>(ExitCode::broken) : status;
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
  sub->add_option("--compute-seconds", o->check.compute_seconds,
                  "seconds of the compute phase's GEMMs (bf16, fp16, fp32), whose checksums "
                  "are compared between ranks of one GPU model; 60 to qualify a GPU under heat")
      ->check(Seconds(0, 86400.0))
      ->default_str("1.5 on a GPU, 0.1 on the host backend");
  sub->add_flag("--no-compute", [o](std::int64_t) { o->check.compute = false; },
                "skip the compute phase")
      ->excludes("--compute-seconds");
  sub->add_option("--size", o->check.large_bytes, "size of the large all-reduce")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{4096}, std::uint64_t{16} << 30))
      ->default_str("32MiB");
  sub->add_option("--iters", o->check.iters, "timed iterations of the large all-reduce")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  sub->add_option("--timeout", o->check.timeout_s,
                  "seconds any wait for peers may take before they are reported")
      ->check(Seconds(0.1, 86400.0))
      ->capture_default_str();
  sub->add_option("--device", o->check.device, "CUDA device ordinal (default: local rank)")
      ->check(DeviceOrdinal());
  add_nccl_lib_option(sub, o->check.nccl_lib);
  add_json_option(sub, o->json_path, "rank 0 writes the job report");
  sub->add_option("--table-rows", o->table_rows,
                  "past this many ranks rank 0's table on the output is short: counts per state "
                  "and the ranks that are not OK (0: every row)")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  sub->add_option("--table-file", o->table_file,
                  "rank 0 writes every rank's row of the table to this file");
  sub->add_option("--prometheus", o->prometheus,
                  "rank 0 writes the job's metrics in node_exporter's textfile format (atomically)");
  sub->add_option("--expect-busbw", o->expect_busbw,
                  "GB/s the timed all-reduce's bus bandwidth should reach, instead of the "
                  "table of GPU families (data/expected-bw); below 80% WARN, below 50% FAIL "
                  "(exit 1)")
      ->type_name("GB/s")
      ->check(FiniteIn(0.001, 1e6, "GB/s"));
  add_history_option(sub, o->history);
  sub->add_option("--nccl-debug", o->nccl_debug,
                  "capture every rank's NCCL log and explain it at the end; off unless given, "
                  "and --nccl-debug alone means info")
      ->type_name("LEVEL")
      ->check(CLI::IsMember({"info", "trace"}, CLI::ignore_case))
      ->expected(0, 1)
      ->default_str("info");
  sub->add_option("--nccl-debug-subsys", o->nccl_debug_subsys,
                  "NCCL_DEBUG_SUBSYS (default INIT,BOOTSTRAP,ENV,NET)")
      ->delimiter(',');
  sub->add_option("--nccl-debug-dir", o->nccl_debug_dir,
                  "run directory for the logs (default gpudiag-nccl-<job id>; must be shared "
                  "by all nodes for one summary)");
  return [o] {
    // GPUDIAG_NCCL_ROOTS (comm/nccl_roots.h): a bad value is exit 2 before joining.
    o->check.nccl_roots = nccl_roots_setting(Env::from_process());
    o->history = read_history_dir(Env::from_process(), o->history);
    return run(*o);
  };
}

}  // namespace gpudiag::cli
