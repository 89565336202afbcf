// The subcommand table's entries. Each cli/<name>.cpp adds its subcommand to
// the app with its options (validation declared on the options) and returns a
// Runner that, once the command line is parsed, does the work and returns the
// exit status. Logic lives in the library; these files parse and render.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace gpudiag::cli {

using Runner = std::function<int()>;

/// --nccl-lib PATH (check, bench, info): the libnccl.so.2 to load. A path
/// that does not exist is a usage error (exit 2) before any rank starts work.
inline void add_nccl_lib_option(CLI::App* sub, std::string& path) {
  sub->add_option("--nccl-lib", path,
                  "the libnccl.so.2 to test, e.g. the one inside your PyTorch (default: "
                  "GPUDIAG_NCCL_LIB, then the loader's search path)")
      ->check(CLI::ExistingFile);
}

/// --history DIR (check, launch, sweep): the folder each verdict's records
/// go to (history/folder.h); GPUDIAG_HISTORY when not given.
inline void add_history_option(CLI::App* sub, std::string& dir) {
  sub->add_option("--history", dir,
                  "append a record of this verdict per host to DIR, a folder many nodes may "
                  "share (default: GPUDIAG_HISTORY; launch passes it to its ranks; read it "
                  "with gpudiag history DIR)")
      ->type_name("DIR");
}

/// A number of seconds in [lo, hi]: rejects nan and inf, which compare false
/// against any range and would otherwise slip through CLI::Range.
inline CLI::Validator Seconds(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v) || !(v >= lo && v <= hi))
          return "must be a number of seconds from " + CLI::detail::to_string(lo) + " to " +
                 CLI::detail::to_string(hi) + ", not " + text;
        return {};
      },
      "SECONDS");
}

/// A finite number in [lo, hi] named `what` ("GB/s"): rejects nan and inf as
/// Seconds does.
inline CLI::Validator FiniteIn(double lo, double hi, const std::string& what) {
  return CLI::Validator(
      [lo, hi, what](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v) || !(v >= lo && v <= hi))
          return "must be a number of " + what + " from " + CLI::detail::to_string(lo) + " to " +
                 CLI::detail::to_string(hi) + ", not " + text;
        return {};
      },
      what);
}

/// A CUDA device ordinal, 0 to 1023 (a range a reader can take in, rather
/// than CLI11's "0 to 1.79769e+308" of NonNegativeNumber).
inline CLI::Validator DeviceOrdinal() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        long long v = -1;
        if (!CLI::detail::lexical_cast(text, v) || v < 0 || v > 1023)
          return "must be a CUDA device ordinal from 0 to 1023 (after CUDA_VISIBLE_DEVICES), not " +
                 text;
        return {};
      },
      "N");
}

/// A path that exists, followed through links; a link loop, a dangling link
/// and a path that cannot be searched each get their own words (CLI11's
/// ExistingPath says "does not exist" for all of them).
CLI::Validator ExistingPathExplained();

/// Writes `text` to `path` (the --json option). An unwritable path or a full
/// disk prints one line on stderr and returns exit status 2 (else 0): never a
/// report silently not written. The caller still ends the job normally.
int write_output_file(const std::string& option, const std::string& path,
                      const std::string& text);

/// The command line as gpudiag was called (after an nccl-tests name was
/// turned into `bench OP`), for a subcommand that starts itself again.
void set_command_line(int argc, char** argv);
const std::vector<std::string>& command_line();

Runner setup_check(CLI::App& app);
Runner setup_launch(CLI::App& app);
Runner setup_bench(CLI::App& app);
Runner setup_scan(CLI::App& app);
Runner setup_nccl_log(CLI::App& app);
Runner setup_fr(CLI::App& app);
Runner setup_ras(CLI::App& app);
Runner setup_info(CLI::App& app);
Runner setup_sweep(CLI::App& app);
Runner setup_history(CLI::App& app);

}  // namespace gpudiag::cli
