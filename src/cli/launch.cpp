// gpudiag launch: not built yet.
#include "cli/commands.h"
#include "util/error.h"

namespace gpudiag::cli {

Runner setup_launch(CLI::App& app) {
  auto* sub = app.add_subcommand("launch", "(not implemented yet)");
  sub->allow_extras();
  return [] () -> int { throw UsageError("'launch' is not implemented in this build yet"); };
}

}  // namespace gpudiag::cli
