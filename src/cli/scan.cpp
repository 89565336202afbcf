// gpudiag scan: not built yet.
#include "cli/commands.h"
#include "util/error.h"

namespace gpudiag::cli {

Runner setup_scan(CLI::App& app) {
  auto* sub = app.add_subcommand("scan", "(not implemented yet)");
  sub->allow_extras();
  return [] () -> int { throw UsageError("'scan' is not implemented in this build yet"); };
}

}  // namespace gpudiag::cli
