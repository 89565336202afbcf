// gpudiag check: placeholder.
#include "cli/commands.h"
#include "util/error.h"

namespace gpudiag::cli {

Runner setup_check(CLI::App& app) {
  auto* sub = app.add_subcommand("check", "(not implemented yet)");
  sub->allow_extras();
  return [] () -> int { throw UsageError("'check' is not implemented in this build yet"); };
}

}  // namespace gpudiag::cli
