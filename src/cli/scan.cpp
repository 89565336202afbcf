// gpudiag scan PATH...: find inf/nan in dumped activations and print the
// reference detector's report (docs/scan.md). Parses options only; the work
// is numerics::run_scan.
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/json_output.h"
#include "numerics/detector/scan_command.h"
#include "numerics/detector/scan_diff.h"
#include "util/error.h"

namespace gpudiag::cli {

namespace {

struct ScanCli {
  numerics::ScanOptions options;
  std::size_t max_frames = 21;
  std::vector<std::uint64_t> trace_batches;
  long long abort_after = -1;
  std::string dtype;
  std::string device = "cpu";
  std::vector<std::string> diff;
};

}  // namespace

Runner setup_scan(CLI::App& app) {
  auto cli = std::make_shared<ScanCli>();
  auto* sub = app.add_subcommand(
      "scan",
      "Find inf/nan in dumped activations (gpudiag-frames/1 dumps from "
      "scripts/dump_activations.py, "
      "or plain .safetensors / .npy files) and print the overflow detector's report; "
      "compare replica checksums (ReplicaCheck's *replica.jsonl)");
  sub->add_option("paths", cli->options.paths,
                  "dump files or directories (every *.safetensors, *.npy, *.stats.json and "
                  "*replica.jsonl)")
      ->check(ExistingPathExplained());
  sub->add_option("--diff", cli->diff,
                  "instead of the report: two batches side by side and the entries whose abs "
                  "max grew most from A to B; each a batch number of the dumps given as paths, "
                  "a dump holding one batch, or DUMP@N")
      ->expected(2)
      ->type_name("A B");
  sub->add_option("--max-frames", cli->max_frames,
                  "frames to show before the first inf/nan (max_frames_to_save)")
      ->default_val(21)
      ->check(CLI::Range(0, 1000000));
  // A batch number is 0 or more: "-1" (which an unsigned conversion would
  // wrap or drop) and anything not all digits are refused with the option named.
  const CLI::Validator batch_number(
      [](std::string& text) -> std::string {
        if (text.empty() || text.size() > 15 ||
            text.find_first_not_of("0123456789") != std::string::npos)
          return "must be a batch number (0 or more), not " + text;
        return {};
      },
      "N");
  sub->add_option("--trace-batches", cli->trace_batches,
                  "batches to trace in full instead of detecting, e.g. 1,3 (trace_batch_nums)")
      ->delimiter(',')
      ->check(batch_number);
  sub->add_option("--abort-after-batch", cli->abort_after,
                  "stop after this batch has finished (abort_after_batch_num)")
      ->check(batch_number);
  add_json_option(sub, cli->options.json_path, "also write every statistic");
  sub->add_option(
         "--dtype", cli->dtype,
         "element type of .npy files that store raw elements (bf16, f8_e4m3, f8_e5m2, ...)")
      ->check([](const std::string& s) {
        return numerics::dtype_from_user(s)
                   ? std::string()
                   : "unknown dtype '" + s + "' (try bf16, f16, f8_e4m3, f8_e5m2)";
      });
  sub->add_option("--near-limit", cli->options.near_limit,
                  "headroom: name the first frame whose abs max reaches this fraction of its "
                  "dtype's largest finite value (on stderr and in --json)")
      ->default_val(0.5)
      ->check(FiniteIn(1e-6, 1.0, "a fraction"));
  sub->add_option("--rank", cli->options.rank,
                  "dumps of a multi-rank job: the rank whose report alone to print (without it: "
                  "the first rank to go inf/nan, a table of ranks, every rank's report)")
      ->check(CLI::Range(0, (1 << 20) - 1));
  sub->add_option("--threads", cli->options.threads,
                  "CPU scanner threads (default: one per hardware thread)")
      ->check(CLI::Range(0, 4096));
  sub->add_option("--device", cli->device,
                  "scanner: cpu, cuda, or auto (times both on the first 256 MiB and keeps the faster; the CPU without a usable GPU or below 64 MiB)")
      ->default_val("cpu")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  sub->add_option("--gpu", cli->options.gpu,
                  "CUDA device ordinal for --device cuda/auto (default: the local rank modulo "
                  "the visible devices, else 0)")
      ->check(CLI::Range(0, 1023));

  return [cli]() -> int {
    auto& o = cli->options;
    o.detector.max_frames = cli->max_frames;
    o.detector.trace_batches = {cli->trace_batches.begin(), cli->trace_batches.end()};
    if (cli->abort_after >= 0)
      o.detector.abort_after_batch = static_cast<std::uint64_t>(cli->abort_after);
    if (!cli->dtype.empty()) o.npy_dtype = numerics::dtype_from_user(cli->dtype);
    o.device = cli->device == "cpu"    ? numerics::ScanDevice::cpu
               : cli->device == "cuda" ? numerics::ScanDevice::cuda
                                       : numerics::ScanDevice::automatic;
    if (o.device == numerics::ScanDevice::cpu && o.gpu >= 0)
      spdlog::warn("--gpu {} is ignored by the CPU scanner; add --device cuda to scan on it",
                   o.gpu);
    // With --json - the report goes to stderr and stdout holds the JSON alone.
    std::ostream& out = json_to_stdout(o.json_path) ? std::cerr : std::cout;
    if (!cli->diff.empty()) return numerics::run_diff(o, cli->diff[0], cli->diff[1], out);
    if (o.paths.empty())
      throw UsageError("scan needs at least one dump file or directory",
                       "gpudiag scan DUMP_DIR (see gpudiag scan --help)");
    return numerics::run_scan(o, out);
  };
}

}  // namespace gpudiag::cli
