// What `gpudiag launch` was asked to do, and the checks that run before any
// process starts.
//
// LaunchOptions is filled by the command line (src/cli/launch.cpp) or by a
// test; validate() rejects a bad combination with a one-line UsageError that
// names the option and what to do, so a job never starts half-configured.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpudiag::launch {

/// Upper bound for --nproc-per-node: each child costs the launcher two pipes
/// and a store connection, and a common hard open-file limit (4096) must hold
/// them all (the launcher raises its soft limit to the hard one).
inline constexpr int kMaxProcPerNode = 1024;
/// Upper bound for --nnodes, so the world size fits an int with room to spare.
inline constexpr int kMaxNodes = 65536;

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  /// Empty: 127.0.0.1 on one node; required when nnodes > 1.
  std::string master_addr;
  /// Not given: a free port on one node, 29500 on several (like torchrun).
  std::optional<int> master_port;
  /// Seconds the other ranks get, after the first failure, before SIGTERM.
  double grace_s = 5.0;
  /// Seconds between SIGTERM (or a forwarded signal) and SIGKILL.
  double kill_after_s = 3.0;
  /// Wall-clock limit for the whole job in seconds; 0: none.
  double timeout_s = 0.0;
  /// Seconds a rank may take to exit after printing its status line before it
  /// is reported and killed (a teardown hang); < 0: auto, the check's own
  /// --timeout (or 60) plus 60, so a rank waiting for slower peers is spared.
  double exit_timeout_s = -1.0;
  /// Prefix each output line with "[rankN]: ".
  bool prefix = true;
  /// Run `command` as a program (searched in PATH) instead of a gpudiag subcommand.
  bool no_gpudiag = false;
  /// Everything after `--`: a gpudiag subcommand and its options, or a program and its arguments.
  std::vector<std::string> command;
};

/// Throws gpudiag::UsageError for the first problem found: counts out of
/// range, a node rank outside [0, nnodes), a bad port, a missing master
/// address on several nodes, negative timeouts, an empty command, or (unless
/// no_gpudiag) a first word that is not one of `subcommands` or is `launch`.
void validate(const LaunchOptions& options, const std::vector<std::string>& subcommands);

/// --exit-timeout as given, or its automatic value (see exit_timeout_s).
double effective_exit_timeout(const LaunchOptions& options);

}  // namespace gpudiag::launch
