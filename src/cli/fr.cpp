// gpudiag fr: where the ranks of a hung or failed job part ways, from PyTorch's NCCL
// flight-recorder dumps.
//
//   gpudiag fr PATH... [--json FILE|-] [--lag N] [--max-file-size SIZE] [--max-values N]
//
// Reads every dump the paths name (flight_recorder/files.h), analyses them
// (flight_recorder/analysis.h) and prints one line per finding; `--json` writes the report
// (schema gpudiag-fr/1) through the one writer (util/file_out.h). Exit status: 0 no rank is
// suspect, 1 suspect ranks (the causes: flight_recorder/causes.h), 2 bad usage or no readable
// dump at all ("no flight-recorder dump was written" when the paths hold no file, or only
// empty ones).
#include <unistd.h>

#include <cstdint>
#include <memory>

#include "cli/commands.h"
#include "cli/json_output.h"
#include "flight_recorder/analysis.h"
#include "flight_recorder/files.h"
#include "flight_recorder/render.h"
#include "report/status_line.h"
#include "util/error.h"
#include "util/strings.h"
#include "util/text.h"

namespace gpudiag::cli {

namespace {

struct FrOptions {
  std::vector<std::string> paths;
  std::string json;
  fr::Options analysis;
  fr::Limits limits;
};

int run_fr(const FrOptions& opt) {
  check_json_target(opt.json);
  auto inputs = fr::read_inputs(opt.paths, opt.limits);
  if (inputs.dumps.empty()) {
    bool none_written = true;  // nothing there, or only files torch created and never wrote
    for (const auto& p : inputs.problems) none_written = none_written && p.kind == "empty";
    for (const auto& p : inputs.problems)
      write_all(STDERR_FILENO, "gpudiag: fr: " + clean_text(p.path) + ": " + p.kind + ": " +
                                   clean_text(p.detail) + "\n");
    if (none_written)
      throw UsageError(
          "no flight-recorder dump was written (" +
              (inputs.problems.empty() ? std::string("no file in ")
                                       : std::to_string(inputs.problems.size()) +
                                             " empty file(s) in ") +
              join(opt.paths, ", ") + ")",
          "torch writes the dumps at a collective timeout when every rank has "
          "TORCH_NCCL_TRACE_BUFFER_SIZE (TORCH_FR_BUFFER_SIZE in torch 2.10+) above 0 and "
          "TORCH_NCCL_DUMP_ON_TIMEOUT=1; TORCH_NCCL_DEBUG_INFO_TEMP_FILE says where");
    throw UsageError("no readable flight-recorder dump in " +
                         std::to_string(inputs.problems.size()) + " file(s)",
                     "pass the files torch wrote at the timeout (TORCH_NCCL_DEBUG_INFO_TEMP_FILE "
                     "prefix + rank, by default /tmp/nccl_trace_rank_<rank>) or their folder");
  }
  const auto report = fr::analyze(std::move(inputs), opt.analysis);
  write_all(human_fd(opt.json), fr::render_text(report));
  if (!opt.json.empty()) {
    if (int status = emit_json(opt.json, fr::render_json(report)); status != 0) return status;
  }
  return report.exit_code();
}

}  // namespace

Runner setup_fr(CLI::App& app) {
  auto opt = std::make_shared<FrOptions>();
  auto* sub = app.add_subcommand(
      "fr",
      "Read PyTorch's NCCL flight-recorder dumps: where the ranks part ways, which are "
      "suspect");
  sub->add_option("paths", opt->paths,
                  "dump files, or folders of them (every regular file in a folder); the rank is "
                  "the file name's trailing number, as torch names them")
      ->required()
      ->type_name("PATH");
  add_json_option(sub, opt->json, "write the report (schema gpudiag-fr/1)");
  sub->add_option("--lag", opt->analysis.lag,
                  "queued-far-past: how many collectives a rank must have queued past its last "
                  "completed one, and its peers completed past it")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))
      ->default_str("4");
  sub->add_option("--max-file-size", opt->limits.max_file_bytes,
                  "refuse a dump file larger than this, unread")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40))
      ->default_str("256MiB");
  sub->add_option("--max-values", opt->limits.max_values,
                  "refuse a dump of more values than this (lists, dicts, strings, numbers; a "
                  "shared one each time it is used)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 34))
      ->default_str("4194304");
  return [opt]() -> int { return run_fr(*opt); };
}

}  // namespace gpudiag::cli
