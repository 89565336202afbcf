// gpudiag nccl-log: explain NCCL_DEBUG=INFO logs, or print the environment that captures them.
//
//   gpudiag nccl-log FILE|DIR... [--json FILE|-]
//   gpudiag nccl-log --print-env RUN_DIR [--level info|trace] [--subsys INIT,NET,...]
//
// `--json -` prints the JSON report (schema gpudiag-nccl-log/1) alone: it says
// what the text says. `--json FILE` writes it and prints the text. `--json`
// was a flag before the JSON convention, so `--json LOG...` read LOG; that
// still works (json_target()), and `--json` never writes over a log.
//
// Exit status: 0 no problem found, 1 problems found, 2 bad input (unreadable path, a FIFO or
// device given as a file, more than --max-input of input, no NCCL lines at all, unknown
// subsystem).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <new>

#include "cli/commands.h"
#include "cli/json_output.h"
#include "nccl_log/capture.h"
#include "nccl_log/render.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag::cli {

namespace {

struct NcclLogOptions {
  std::vector<std::string> paths;
  std::string json;
  std::string print_env;
  std::string level = "info";
  std::vector<std::string> subsys;
  std::uint64_t max_input = nccl_log::kDefaultMaxInput;
};

/// Where the JSON goes, keeping `--json` a flag for those who wrote it as one:
/// a value that is an existing directory, or an existing file not named
/// *.json, is a log to read (and the JSON goes to stdout); `--json -` with no
/// log given reads standard input, as the flag `--json` before `-` did.
std::string json_target(NcclLogOptions& opt) {
  namespace fs = std::filesystem;
  const std::string& v = opt.json;
  if (v.empty() || v == kJsonStdout) {
    if (v == kJsonStdout && opt.paths.empty()) opt.paths.push_back("-");
    return v;
  }
  std::error_code ec;
  const auto st = fs::status(v, ec);
  const bool is_log = !ec && fs::exists(st) &&
                      (fs::is_directory(st) || fs::path(v).extension() != ".json");
  if (!is_log) return v;
  opt.paths.insert(opt.paths.begin(), v);
  return kJsonStdout;
}

int run_nccl_log(NcclLogOptions& opt) {
  if (!opt.print_env.empty()) {
    if (!opt.paths.empty())
      throw UsageError(
          "--print-env takes a run directory, not log files",
          "run `gpudiag nccl-log --print-env DIR` and `gpudiag nccl-log DIR` separately");
    nccl_log::CaptureRequest request;
    request.run_dir = opt.print_env;
    request.level = opt.level;
    request.subsys = opt.subsys;
    auto plan = nccl_log::prepare_capture(request);
    std::cout << nccl_log::shell_exports(plan);
    return 0;
  }
  const std::string json = json_target(opt);
  if (opt.paths.empty())
    throw UsageError("no log file or directory given",
                     "gpudiag nccl-log FILE|DIR... (or --print-env DIR to capture logs)");
  nccl_log::InputLimits limits;
  limits.max_bytes = opt.max_input;
  nccl_log::Report report;
  try {
    report = nccl_log::summarize(opt.paths, limits);
  } catch (const std::bad_alloc&) {
    // Not "problems found" (exit 1), and not the check's advice about --mem:
    // the logs given do not fit this host's memory.
    throw UsageError("out of memory reading the logs (" + std::to_string(opt.paths.size()) +
                         " path(s), up to --max-input " + human_bytes(opt.max_input) + ")",
                     "pass the logs of one run only, fewer ranks' files, or a lower --max-input");
  }
  if (!json_to_stdout(json)) std::cout << nccl_log::render_text(report);
  std::cout.flush();
  if (json.empty()) return report.exit_code();
  auto doc = nccl_log::render_json(report);
  doc["schema"] = kNcclLogSchema;
  const int json_status = emit_json(json, std::move(doc));
  return json_status != 0 ? json_status : report.exit_code();
}

}  // namespace

Runner setup_nccl_log(CLI::App& app) {
  auto opt = std::make_shared<NcclLogOptions>();
  auto* sub = app.add_subcommand(
      "nccl-log", "Explain NCCL_DEBUG=INFO logs: per-rank facts, findings and what to try");
  sub->add_option("paths", opt->paths,
                  "log files or run directories: one interleaved capture, or per-rank "
                  "NCCL_DEBUG_FILE files; - reads standard input");
  add_json_option(sub, opt->json, "write the report (- prints only the JSON)", false);
  sub->add_option("--max-input", opt->max_input,
                  "stop with an error after reading this much in all (e.g. a pipe that never "
                  "ends)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 50))
      ->default_str("4GiB");
  sub->add_option("--print-env", opt->print_env,
                  "create RUN_DIR and print the NCCL_DEBUG* exports that log every rank there")
      ->type_name("RUN_DIR");
  sub->add_option("--level", opt->level, "NCCL_DEBUG level for --print-env")
      ->check(CLI::IsMember({"info", "trace"}, CLI::ignore_case));
  sub->add_option("--subsys", opt->subsys,
                  "NCCL_DEBUG_SUBSYS for --print-env (default INIT,BOOTSTRAP,ENV,NET)")
      ->delimiter(',');
  return [opt]() -> int { return run_nccl_log(*opt); };
}

}  // namespace gpudiag::cli
