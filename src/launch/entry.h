// What gpudiag launch runs, from torchrun's entry points (resolve_entry), and
// the environment torchrun gives a training script's children (torch_variables):
//
//   launch [options] SCRIPT [args]     python -u SCRIPT args   (SCRIPT: an existing file)
//   launch [options] -m MODULE [args]  python -u -m MODULE args
//   launch [options] --no-python PROGRAM [args]   PROGRAM args (searched in PATH)
//   launch [options] [--] SUBCOMMAND [options]    gpudiag SUBCOMMAND (check, bench, ...)
//
// "python" is PYTHON_EXEC when set (torchrun's own override), else the
// interpreter torchrun itself would be (python_interpreter). torchrun
// (torch/distributed/run.py, 1.13 to 2.x) runs `sys.executable -u`; a
// launcher that is not Python has no sys.executable.
//
// The children of a torch program (every form but SUBCOMMAND) get torchrun's
// variables, as torch's LocalElasticAgent._start_workers sets them
// (torch/distributed/elastic/agent/server/local_elastic_agent.py), and each its
// own TORCHELASTIC_ERROR_FILE (torch/distributed/elastic/multiprocessing/
// __init__.py start_processes: <log dir>/attempt_K/<local rank>/error.json).
// Differences, each for a reason (docs/launch.md): TORCHELASTIC_USE_AGENT_STORE
// is False (the launcher's store speaks gpudiag's protocol, not torch's, so
// rank 0 creates torch's store as under a c10d rendezvous).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "launch/job.h"
#include "launch/options.h"
#include "util/env.h"

namespace gpudiag::launch {

/// Turns the torchrun forms into `options.command` (and no_gpudiag), or
/// throws UsageError with one line naming the forms. Sets options.torch_children
/// for torchrun's forms (SCRIPT, -m, --no-python); gpudiag's own --no-gpudiag
/// runs a plain program, without torchrun's variables.
void resolve_entry(LaunchOptions& options, const std::vector<std::string>& subcommands,
                   const Env& env);

/// The Python interpreter torchrun's forms run: PYTHON_EXEC, else the one
/// in the shebang of `torchrun` on PATH (torchrun runs its children with its
/// own), else the first python3 on PATH with torch installed, else the first
/// python3 on PATH; `why` (when given) says which rule chose it.
std::string python_interpreter(const Env& env, std::string* why = nullptr);

/// torch's version ("2.11.0", "1.13.0a0") as installed for `python` (its
/// version.py in the interpreter's site or dist packages, read, not imported);
/// "" when not found.
std::string torch_version_for(const std::string& python);

/// The async error variable torchrun of `torch_version` sets:
/// TORCH_NCCL_ASYNC_ERROR_HANDLING from torch 2.2, NCCL_ASYNC_ERROR_HANDLING
/// before (and when the version is unknown).
std::string async_error_variable(const std::string& torch_version);

/// Whether a torch program's ranks get the launcher's store as their agent
/// store (TORCHELASTIC_USE_AGENT_STORE=True), as torchrun decides it: under
/// the static rendezvous (its default), not under c10d or --standalone.
bool uses_agent_store(const LaunchOptions& options);

/// torchrun's per-child variables beyond rank_variables() (job.h).
std::vector<std::pair<std::string, std::string>> torch_variables(const JobInfo& job, int local_rank,
                                                                 const Env& parent);

}  // namespace gpudiag::launch
