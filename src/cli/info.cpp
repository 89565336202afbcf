// gpudiag info: placeholder.
#include "cli/commands.h"
#include "util/error.h"

namespace gpudiag::cli {

Runner setup_info(CLI::App& app) {
  auto* sub = app.add_subcommand("info", "(not implemented yet)");
  sub->allow_extras();
  return [] () -> int { throw UsageError("'info' is not implemented in this build yet"); };
}

}  // namespace gpudiag::cli
