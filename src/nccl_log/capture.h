// Capturing a run's NCCL logs per rank: the environment to set before NCCL initialises, and
// the run directory the logs go to.
//
// NCCL reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE once, at its first log call
// (src/debug.cc). NCCL_DEBUG_FILE is a file name in which NCCL replaces "%h" by the host name
// (up to its first '.', with '/' and '%' turned into '-'), "%p" by the process id and "%%" by
// "%"; "~" is not expanded, a relative path is relative to the process's working directory,
// and the directory must already exist: when fopen fails NCCL silently logs to stdout. The
// file is opened with "w" (a rerun with the same name truncates it) and only when NCCL_DEBUG
// is above VERSION.
//
// So prepare_capture() makes the run directory absolute, creates it, checks it is writable,
// and builds a file name that is unique per process: either explicit ("nccl.rank3.node1.
// 4242.log", when the caller knows its host, pid and rank, so it can find its own file) or
// NCCL's own "%h.%p" substitution (when the environment is set for processes not yet
// started, e.g. exported for mpirun/srun to pass on).
//
// Under mpirun/srun only the launching node's environment is inherited unless forwarded:
// a process that calls apply_capture() itself, before its first NCCL call, is covered
// wherever it runs. The run directory must be on a file system every node writes to for
// one summary to see all ranks; otherwise each node holds its own ranks' files.
//
// Typical use (the lead's `gpudiag check --nccl-debug`):
//
//   CaptureRequest req;
//   req.run_dir = dir; req.host = hostname; req.pid = getpid(); req.rank = world.rank;
//   auto plan = prepare_capture(req);
//   apply_capture(plan);            // before ncclGetUniqueId / ncclCommInitRank
//   ... run the checks ...
//   auto report = summarize({plan.run_dir.string()});   // render.h
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "util/env.h"

namespace gpudiag::nccl_log {

struct CaptureRequest {
  std::filesystem::path run_dir;    ///< where per-rank logs go; created if missing
  std::string level = "info";       ///< "info" or "trace" (any case)
  std::vector<std::string> subsys;  ///< NCCL_DEBUG_SUBSYS names; empty: INIT,BOOTSTRAP,ENV,NET
  std::string host;                 ///< this host's name; empty: NCCL substitutes %h
  long pid = 0;                     ///< the pid of the process that will initialise NCCL; 0: %p
  int rank = -1;                    ///< >= 0: the rank goes into the file name too
};

struct CapturePlan {
  std::filesystem::path run_dir;   ///< absolute, exists, writable
  std::string debug_file;          ///< the NCCL_DEBUG_FILE value
  std::filesystem::path log_file;  ///< the exact log path when host and pid were given
  std::vector<std::pair<std::string, std::string>> env;  ///< variables to set, in order
  /// The outermost directory prepare_capture created (run_dir or a parent of it); empty when
  /// run_dir existed already. discard_capture removes no more than this.
  std::filesystem::path created;
};

/// Validates the request, creates the run directory and returns what to set. Throws
/// UsageError (exit status 2) for an unknown level or subsystem, a "~" path, or a directory
/// that cannot be created or written.
CapturePlan prepare_capture(const CaptureRequest& request);

/// Sets the plan's variables in this process (overwriting). Call before NCCL's first call.
void apply_capture(const CapturePlan& plan);

/// Undoes prepare_capture when NCCL never ran (a backend without NCCL): removes the
/// directories it created, from run_dir up to `created`, each only if it is empty. Never
/// throws; a directory that holds anything stays.
void discard_capture(const CapturePlan& plan);

/// The one line said when --nccl-debug meets a backend that does not use NCCL:
/// "--nccl-debug: NCCL is not used by the host backend; nothing to capture".
std::string not_used_notice(const std::string& backend);

/// "export NCCL_DEBUG='INFO'" lines for a shell, one per variable.
std::string shell_exports(const CapturePlan& plan);

/// NCCL_DEBUG_SUBSYS names NCCL 2.28 knows (ALL included).
const std::vector<std::string>& known_subsystems();

/// A run directory name every rank of one job computes alike: "gpudiag-nccl-<id>" under the
/// working directory, with <id> from SLURM_JOB_ID (plus SLURM_STEP_ID), TORCHELASTIC_RUN_ID or
/// OMPI_MCA_ess_base_jobid, else the local time YYYYmmdd-HHMMSS (then only rank 0 should pick
/// it and pass it on).
std::filesystem::path default_run_dir(const Env& env, std::chrono::system_clock::time_point now);

}  // namespace gpudiag::nccl_log
