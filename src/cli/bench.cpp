// gpudiag bench [OP]: the check's setup (GPU, exchange, communicator, a
// verified all-reduce), then nccl-tests' measurement of one collective with
// its flags and its output layout (bench/engine.h, report/bench_report.h),
// or with --links the link test (every pair of ranks); rank 0 prints.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "bench/engine.h"
#include "checks/check.h"
#include "checks/peer_book.h"
#include "cli/bench_cli.h"
#include "cli/commands.h"
#include "cli/json_output.h"
#include "cli/world_setup.h"
#include "comm/nccl_env.h"
#include "comm/nccl_roots.h"
#include "report/prom_reports.h"
#include "report/bench_report.h"
#include "report/expected_bw_job.h"
#include "report/job_report.h"
#include "report/nccl_tests_json.h"
#include "report/link_report.h"
#include "report/status_line.h"
#include "util/error.h"
#include "util/file_out.h"
#include "util/env.h"
#include "world/discovery.h"
#include "util/log.h"
#include "util/strings.h"
#include "world/fingerprint_compare.h"

namespace gpudiag::cli {

namespace {


/// "2.28.9" -> 22809, as ncclGetVersion gives it since 2.9; 0 when not a version.
int nccl_version_code(const std::string& v) {
  int major = 0, minor = 0, patch = 0;
  if (std::sscanf(v.c_str(), "%d.%d.%d", &major, &minor, &patch) != 3) return 0;
  return major * 10000 + minor * 100 + patch;
}

/// One "# gpudiag: ..." line for each nccl-tests flag gpudiag runs differently
/// or not at all (nccl-tests prints such lines for what it cannot do, and
/// runs: so does gpudiag, rather than refuse a command line the field uses).
std::vector<std::string> flag_notes(const BenchCli& o) {
  std::vector<std::string> n;
  auto add = [&](bool given, const std::string& text) {
    if (given) n.push_back(text);
  };
  add(o.nthreads * o.ngpus > 1,
      "-t " + std::to_string(o.nthreads) + " -g " + std::to_string(o.ngpus) +
          ": every process drives one GPU; under a launcher, start one rank per GPU instead "
          "(mpirun -np N, srun -n N)");
  if (const char* g = std::getenv("GPUDIAG_BENCH_GPUS_PER_PROCESS"))
    n.push_back(std::string("-g ") + g + " in one process: run as " + g +
                " ranks of one GPU each, started by gpudiag launch");
  add(o.agg > 1, "-m " + std::to_string(o.agg) +
                     ": calls are not aggregated in one group; each iteration is one call");
  add(o.parallel_init != 0, "-p 1: each rank initialises NCCL on its own thread anyway");
  add(o.stream_null != 0, "-y 1: calls go on gpudiag's own stream, not the null stream");
  add(o.graph > 0, "-G " + std::to_string(o.graph) +
                       ": CUDA graphs are not used; each iteration is a plain call");
  add(o.cputime != 0, "-C 1: the time column is the device's time between CUDA events (NCCL) "
                      "or the host's (host backends), not the CPU time");
  add(o.timestamps != 0, "-S 1: no timestamp column");
  add(o.local_register != 0, "-R " + std::to_string(o.local_register) +
                                 ": buffers are not registered with NCCL");
  add(o.cta_policy >= 0, "-x " + std::to_string(o.cta_policy) + ": NCCL's CTA policy is not set");
  add(o.device_impl != 0, "-D " + std::to_string(o.device_impl) +
                              ": NCCL's own implementation runs, not a device-API one");
  add(o.device_ctas != 16, "-V " + std::to_string(o.device_ctas) + ": no device-API kernel runs");
  add(o.memory != 0, "-M 1: no memory usage report");
  add(o.unalign != 0, "-u " + std::to_string(o.unalign) + ": buffers start aligned");
  add(o.per_iter != 0 && o.output_file.empty(),
      "-I 1: per-iteration times go to -J's JSON (nccl-tests' keys), and there is no -J FILE; "
      "the text has no i_* columns");
  add(o.per_iter != 0 && !o.output_file.empty(),
      "-I 1: per-iteration times of every rank are in -J's JSON at nccl-tests' keys; the text "
      "has no i_* columns");
  return n;
}

/// --links measures one size per pair: -e (or --link-size) is that size, as
/// nccl-tests reads it. The sweep's other flags would be silently ignored,
/// so they are refused. Records stay one figure per peer, which keeps the
/// link matrix at n^2 values for tens of thousands of ranks.
void apply_link_options(BenchCli& o) {
  if (!o.sweep_only_given.empty())
    throw UsageError(o.sweep_only_given.front() + " does not apply to --links",
                     "the link test measures one size per pair: give it with -e SIZE or "
                     "--link-size SIZE; -n, -w, -T and -J apply as they do to the sweep");
  if (o.max_given) {
    if (o.link_size_given && o.link_bytes != o.max_bytes)
      throw UsageError("-e/--maxbytes " + std::to_string(o.max_bytes) + " and --link-size " +
                           std::to_string(o.link_bytes) + " disagree",
                       "give the link size once");
    if (o.max_bytes < 4 || o.max_bytes > (4ull << 30))
      throw UsageError("-e/--maxbytes " + std::to_string(o.max_bytes) +
                           " is outside the link test's 4 bytes to 4 GiB",
                       "give -e between 4 and 4G");
    o.link_bytes = o.max_bytes;
  }
  o.check.link_bytes = o.link_bytes;
}

/// What the hardware should reach (report/expected_bw_job.h), printed below
/// the table after `prefix`; true when it is far below (FAIL).
bool print_expectation(int out, const BwVerdict& v, std::string_view prefix) {
  write_all(out, verdict_line(v, prefix));
  return v.failed();
}

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

/// The collective, types, reductions and roots the options name.
std::shared_ptr<BenchPlan> make_plan(const BenchCli& o) {
  auto plan = std::make_shared<BenchPlan>();
  auto coll = parse_coll(o.op);
  if (!coll)
    throw UsageError("unknown collective '" + o.op + "'",
                     "give one of all_reduce, all_gather, reduce_scatter, broadcast, reduce, "
                     "alltoall, sendrecv (or nccl-tests' names, e.g. all_reduce_perf)");
  plan->coll = *coll;
  if (o.dtype == "all") {
    plan->types.assign(std::begin(kAllDTypes), std::end(kAllDTypes));
  } else if (auto t = parse_dtype(o.dtype)) {
    plan->types = {*t};
  } else {
    throw UsageError("unknown -d/--datatype '" + o.dtype + "'",
                     "give int8, uint8, int32, uint32, int64, uint64, half, float, double, "
                     "bfloat16 or all");
  }
  if (o.redop == "all") {
    plan->ops.assign(std::begin(kAllRedOps), std::end(kAllRedOps));
  } else if (auto op = parse_redop(o.redop)) {
    plan->ops = {*op};
  } else {
    throw UsageError("unknown -o/--op '" + o.redop + "'", "give sum, prod, min, max, avg or all");
  }
  plan->sizes = sweep_sizes(o);
  plan->iters = o.check.iters;
  plan->warmup = o.check.warmup;
  plan->check = o.datacheck;
  plan->blocking = o.blocking != 0;
  plan->average = o.average;
  // -N 0: nccl-tests runs until stopped; here until interrupted too (a bound
  // no run reaches).
  plan->cycles = o.cycles == 0 ? (std::int64_t{1} << 40) : o.cycles;
  return plan;
}

/// nccl-tests' `all_reduce_perf -g 8` on one node: one process driving 8
/// GPUs. gpudiag runs one GPU per process, so a process started alone with
/// -t x -g > 1 starts that many ranks of itself (gpudiag launch, one per GPU)
/// and their report is the one printed: the command line works unchanged.
/// Returns only when it does not apply.
void relaunch_per_gpu(const BenchCli& o) {
  const int n = o.nthreads * o.ngpus;
  if (n <= 1 || discover_world(Env::from_process()).launcher != Launcher::none) return;
  std::vector<std::string> args = {"/proc/self/exe", "launch", "--nproc-per-node",
                                   std::to_string(n), "--", "bench"};
  const auto& given = command_line();
  bool skip = false;
  // Everything after "bench" (or the nccl-tests name's op), without -t/-g.
  std::size_t from = 1;
  while (from < given.size() && given[from] != "bench") ++from;
  for (std::size_t i = from + 1; i < given.size(); ++i) {
    const std::string& a = given[i];
    if (skip) {
      skip = false;
      continue;
    }
    if (a == "-g" || a == "-t" || a == "--ngpus" || a == "--nthreads") {
      skip = true;
      continue;
    }
    if (a.starts_with("--ngpus=") || a.starts_with("--nthreads=") ||
        ((a.starts_with("-g") || a.starts_with("-t")) && a.size() > 2 && !a.starts_with("--")))
      continue;
    args.push_back(a);
  }
  ::setenv("GPUDIAG_BENCH_GPUS_PER_PROCESS", std::to_string(n).c_str(), 1);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  ::execv(argv[0], argv.data());
  throw Error(ExitCode::internal, std::string("cannot start gpudiag launch for -g: ") +
                                      std::strerror(errno));
}

/// -J FILE: nccl-tests' JSON, with gpudiag's own document under "gpudiag".
/// As nccl-tests does, an existing FILE is kept (FILE.0, FILE.1, ... are
/// tried) and a file that cannot be written is skipped with a '#' line (and
/// a warning): the measurement stands.
void write_nccl_tests_json(int out, const std::string& path, const NcclTestsJson& nt,
                           const NcclTestsPrinter& printer, const char* schema,
                           const nlohmann::json& doc, const CheckResult& result) {
  nlohmann::json gpudiag = {{"schema", schema}};
  for (const auto& [k, v] : doc.items()) gpudiag[k] = v;
  auto j = nt.document(printer.wrong(), printer.avg_busbw(), gpudiag, command_line());
  if (!job_ok(result)) j["errors"].push_back("the measurement did not complete: see \"gpudiag\"");
  std::string error;
  const auto written = write_new_file(
      path, j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n", error);
  if (written) {
    write_all(out, "# Writing JSON output to " + *written + "\n");
  } else {
    write_all(out, "# skipping json output; " + error + "\n");
    spdlog::warn("-J {}: not written: {}", path, error);
  }
}

int run(BenchCli o) {
  relaunch_per_gpu(o);
  if (!o.links && o.min_bytes > o.max_bytes)
    throw UsageError("-b/--minbytes " + std::to_string(o.min_bytes) +
                     " is larger than -e/--maxbytes " + std::to_string(o.max_bytes));
  if (!o.links && o.step_factor > 0 && o.step_factor <= 1)
    throw UsageError(
        "-f/--stepfactor " + fmt::format("{}", o.step_factor) + " does not grow the size",
        "give a factor above 1, e.g. -f 2, or -i BYTES for equal steps");
  std::shared_ptr<BenchPlan> plan;
  if (o.links)
    apply_link_options(o);
  else if (!o.links_only_given.empty())
    throw UsageError(o.links_only_given.front() + " applies to --links only",
                     "add --links to measure every pair's link, or leave it out");
  else
    plan = make_plan(o);
  o.check.mem_bytes = o.check.mem_bytes ? o.check.mem_bytes : 4096;
  // The check's own all-reduce still verifies the job; its timing is the
  // sweep's business, so it stays small.
  o.check.large_bytes = 1ull << 20;
  o.check.nccl_roots = nccl_roots_setting(Env::from_process());  // bad: exit 2 before joining
  auto job = join_job(read_job_settings(Env::from_process(), o.check.timeout_s));
  // Rank 0 writes the --json file: a path it cannot write ends the job now.
  if (job.setup.world.rank == 0) {
    check_file_target("--json", o.json_path, WriteMode::through);
    check_file_target("--prometheus", o.prometheus, WriteMode::replace);
  }
  set_log_tag("rank " + std::to_string(job.setup.world.rank));
  // Before NCCL's first call: its environment as gpudiag's NCCL needs it.
  for (const auto& w : prepare_nccl_env(job.setup.env, NcclEnvUse::check))
    if (job.setup.world.rank == 0) spdlog::warn("{}", w.text);
  const int out = human_fd(o.json_path);  // stderr when the JSON takes stdout
  std::unique_ptr<NcclTestsPrinter> printer;
  std::unique_ptr<NcclTestsJson> nt;  // -J: nccl-tests' own JSON
  if (plan) {
    plan->per_iter = o.per_iter != 0 && per_iter_fits(job.setup.world.size, plan->iters);
    // Roots: -r R, or every rank with -r -1 (nccl-tests' way).
    const int n = job.setup.world.size;
    if (o.root >= n)
      throw UsageError("-r/--root " + std::to_string(o.root) + " is not a rank of this job (" +
                       std::to_string(n) + " ranks)");
    plan->roots.clear();
    for (int r = o.root < 0 ? 0 : o.root; r <= (o.root < 0 ? n - 1 : o.root); ++r)
      plan->roots.push_back(r);
    plan->corrupt_rank = test_corrupt_rank(job.setup.env.get("GPUDIAG_TEST_CORRUPT"));
    o.check.bench = plan;
    o.check.bench_start = [&](const RankSlots<std::optional<RankRecord>>& table) {
      BenchHeader h;
      h.program = std::string(coll_name(plan->coll)) + "_perf";
      h.min_bytes = o.min_bytes;
      h.max_bytes = o.max_bytes;
      h.step_factor = o.step_factor > 0 ? o.step_factor : (o.step_bytes ? 0 : 2);
      h.step_bytes = o.step_bytes;
      h.warmup = plan->warmup;
      h.iters = plan->iters;
      h.check = plan->check;
      h.average = plan->average;
      h.blocking = plan->blocking;
      h.blocking_mode = o.blocking;
      // The parameters line says what runs (one thread, one GPU, no graph...);
      // what was asked and not done is each on its own note line.
      h.notes = flag_notes(o);
      // -t/-g of one process, run as that many ranks (relaunch_per_gpu): the
      // header says what nccl-tests' would, the job having done the same.
      if (const char* g = std::getenv("GPUDIAG_BENCH_GPUS_PER_PROCESS"))
        if (auto v = parse_int(g); v && *v >= 1 && *v <= 1024) h.ngpus = static_cast<int>(*v);
      if (o.cycles == 0) h.notes.push_back("-N 0: the sweep repeats until interrupted");
      h.nccl_code = table[0] && table[0]->backend == "nccl"
                        ? nccl_version_code(table[0]->nccl_version)
                        : 0;  // no NCCL in the measurement
      h.backend = table[0] ? table[0]->backend : "";
      h.versions = table[0] ? versions_text(*table[0], "") : "";
      if (o.per_iter != 0 && !plan->per_iter)
        h.notes.push_back("-I 1: " + std::to_string(job.setup.world.size) + " ranks x " +
                          std::to_string(plan->iters) + " iterations is more than gpudiag "
                          "gathers (16 M values): no per-iteration times");
      printer = std::make_unique<NcclTestsPrinter>(out, h);
      if (!o.output_file.empty()) {
        nt = std::make_unique<NcclTestsJson>(h, plan->per_iter, o.per_iter_skip);
        printer->attach(nt.get());
      }
      printer->begin(dense_records(table));
      return static_cast<BenchSink*>(printer.get());
    };
  }
  CheckResult result = run_check(o.check, job.setup);
  int json_status = 0;
  // A benchmark prints results, not OK lines; a broken rank still says why.
  if (!result.me.ok) write_all(out, status_line(result.me));
  job.meet_after_printing(result, o.check.timeout_s);
  bool findings = false;
  if (result.me.rank == 0) {
    // No footer for a sweep that did not finish: "0 OK" would claim rows never measured.
    if (printer && job_ok(result))
      printer->end();
    else if (printer)
      write_all(out, "# the measurement did not complete: see the job report\n");
    // A failed job gets the check's job report: who failed, where, and why.
    nlohmann::json json = job_json(result);
    const char* schema = kCheckSchema;
    if (job_ok(result) && o.links) {
      write_all(out, versions_line(result));
      auto verdict = link_verdict(result);
      findings = verdict.slow_links > 0;
      write_all(out, link_table(result, verdict));
      json = link_json(result, verdict);
      schema = kLinksSchema;
      auto& expected = json["expected_links"] = nlohmann::json::array();
      for (const auto& v : link_bw_verdicts(result, verdict, o.expect_busbw)) {
        findings = print_expectation(out, v, "") || findings;
        expected.push_back(verdict_json(v));
      }
    } else if (job_ok(result) && printer) {
      findings = printer->wrong() > 0;
      json = printer->json();
      schema = kBenchSchema;
      // The sweep's verdict at its largest size, against what the hardware should reach.
      const auto expected = sweep_busbw_verdict(result, printer->largest_bytes(),
                                                printer->largest_busbw(), o.expect_busbw);
      findings = print_expectation(out, expected, "# ") || findings;
      json["expected_busbw"] = verdict_json(expected);
    } else if (!job_ok(result)) {
      write_all(out, versions_line(result) + summary_table(result));
    }
    // What differs between the ranks may explain a slow or failed run; after
    // nccl-tests' table every line of it is a '#' comment, as its parsers expect.
    std::string fp = render_fingerprint(result.fingerprint);
    if (printer) fp = prefix_lines(fp, "# ");
    write_all(out, fp);
    if (!o.json_path.empty()) json_status = emit_json(o.json_path, schema, json);
    if (int s = write_report_prometheus(o.prometheus, schema, json,
                                        result.me.backend == "nccl" ? result.me.nccl_version : ""))
      json_status = s;
    if (nt) write_nccl_tests_json(out, o.output_file, *nt, *printer, schema, json, result);
  }
  int status = job.finish(result);
  if (status == 0) status = json_status;
  // A slow link or wrong data is a finding: rank 0 says so in its status.
  return status == 0 && findings ? static_cast<int>(ExitCode::broken) : status;
}

}  // namespace

Runner setup_bench(CLI::App& app) {
  auto o = std::make_shared<BenchCli>();
  o->check.iters = 20;
  auto* sub = app.add_subcommand(
      "bench",
      "nccl-tests' measurement of a collective (all_reduce_perf and the others: the same flags "
      "and output), over the job, under any launcher");
  add_bench_options(sub, *o);
  // Flags the sweep takes and --links does not (-n, -w, -T, -J, -e apply to both).
  std::vector<std::pair<CLI::Option*, std::string>> sweep_only;
  for (const char* name : {"OP", "-b", "-f", "-i", "-c", "-o", "-d", "-r", "-z", "-a"}) {
    CLI::Option* opt = sub->get_option(name);
    // "-b,--minbytes,--min" reads as "-b/--minbytes".
    std::string names = opt->get_name(false, true);
    names = names.substr(0, names.find(',', names.find(',') + 1));
    std::replace(names.begin(), names.end(), ',', '/');
    sweep_only.emplace_back(opt, name == std::string("OP") ? "the collective OP" : names);
  }
  CLI::Option* max = sub->get_option("-e");
  CLI::Option* link_size = sub->get_option("--link-size");
  CLI::Option* link_schedule = sub->get_option("--link-schedule");
  return [o, sweep_only, max, link_size, link_schedule] {
    for (const auto& [opt, name] : sweep_only)
      if (opt->count() > 0) o->sweep_only_given.push_back(name);
    for (CLI::Option* opt : {link_size, link_schedule})
      if (opt->count() > 0) o->links_only_given.push_back(opt->get_name());
    o->max_given = max->count() > 0;
    o->link_size_given = link_size->count() > 0;
    return run(*o);
  };
}

}  // namespace gpudiag::cli
