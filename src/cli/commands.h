// The subcommand table's entries. Each cli/<name>.cpp adds its subcommand to
// the app with its options (validation declared on the options) and returns a
// Runner that, once the command line is parsed, does the work and returns the
// exit status. Logic lives in the library; these files parse and render.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace gpudiag::cli {

using Runner = std::function<int()>;

Runner setup_check(CLI::App& app);
Runner setup_launch(CLI::App& app);
Runner setup_bench(CLI::App& app);
Runner setup_scan(CLI::App& app);
Runner setup_nccl_log(CLI::App& app);
Runner setup_info(CLI::App& app);

}  // namespace gpudiag::cli
