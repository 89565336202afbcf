// gpudiag bench: not built yet.
#include "cli/commands.h"
#include "util/error.h"

namespace gpudiag::cli {

Runner setup_bench(CLI::App& app) {
  auto* sub = app.add_subcommand("bench", "(not implemented yet)");
  sub->allow_extras();
  return [] () -> int { throw UsageError("'bench' is not implemented in this build yet"); };
}

}  // namespace gpudiag::cli
