// gpudiag info: what this rank would use and why; no MPI or NCCL initialised.
#include <unistd.h>

#include "cli/commands.h"
#include "report/status_line.h"
#include "util/error.h"
#include "world/info.h"

namespace gpudiag::cli {

Runner setup_info(CLI::App& app) {
  struct Options {
    bool json = false;
    int device = -1;
    std::string nccl_lib;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand(
      "info", "Show the launcher, rank, GPU, CUDA/NCCL/MPI versions and relevant environment");
  sub->add_flag("--json", o->json, "print JSON instead of text");
  sub->add_option("--device", o->device, "CUDA device ordinal (default: local rank)")
      ->check(CLI::NonNegativeNumber);
  add_nccl_lib_option(sub, o->nccl_lib);
  return [o] {
    auto info = collect_info(Env::from_process(), o->device, o->nccl_lib);
    // One write per rank so blocks of ranks sharing a terminal stay whole.
    write_all(STDOUT_FILENO, o->json ? info.dump(2) + "\n" : render_info(info));
    return static_cast<int>(info.contains("error") ? ExitCode::usage : ExitCode::ok);
  };
}

}  // namespace gpudiag::cli
