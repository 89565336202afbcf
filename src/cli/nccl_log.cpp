// gpudiag nccl-log: not built yet.
#include "cli/commands.h"
#include "util/error.h"

namespace gpudiag::cli {

Runner setup_nccl_log(CLI::App& app) {
  auto* sub = app.add_subcommand("nccl-log", "(not implemented yet)");
  sub->allow_extras();
  return [] () -> int { throw UsageError("'nccl-log' is not implemented in this build yet"); };
}

}  // namespace gpudiag::cli
