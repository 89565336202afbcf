// The job a launcher runs, once every default is filled in, and the
// environment each of its children gets.
//
// resolve_job() settles what the options left open: the master address
// (127.0.0.1 on one node), the port (a free one on one node, 29500 on
// several), the token ranks present to the rendezvous store, and a launch id.
// rank_environment() then gives each child the torchrun-compatible variables
// (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
// GROUP_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) plus GPUDIAG_LAUNCH_ID and
// GPUDIAG_TOKEN. See docs/launch.md for the token rules and their limits.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "launch/options.h"
#include "util/env.h"

namespace gpudiag::launch {

/// Port torchrun uses when several nodes meet and none is given.
inline constexpr int kDefaultMultiNodePort = 29500;

struct JobInfo {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;
  int master_port = 0;
  /// Shared secret-ish value every rank of the job presents to the store.
  std::string token;
  /// Marks RANK etc. as set by this launcher (not left over in a shell).
  std::string launch_id;

  int world_size() const { return nnodes * nproc_per_node; }
  /// Global rank of the child with local rank `local_rank` on this node.
  int rank_of(int local_rank) const { return node_rank * nproc_per_node + local_rank; }
};

/// Fills in defaults for validated options. `env` is the launcher's
/// environment (GPUDIAG_TOKEN, if set and non-empty, is the token). Picking a
/// free port binds a socket; throws gpudiag::Error if none can be had.
JobInfo resolve_job(const LaunchOptions& options, const Env& env);

/// The token nodes agree on without being told one: a hash of the master
/// address and port. Anyone who knows both can compute it, so it keeps a
/// stray or stale job out of the store but is no protection against an
/// attacker; export GPUDIAG_TOKEN on every node for that.
std::string derive_token(const std::string& master_addr, int master_port);

/// A free TCP port on this host (bound to port 0, read back, released).
/// Another process may take it before the store binds it; the window is short.
int pick_free_port();

/// The variables gpudiag launch sets for one child, in a fixed order.
std::vector<std::pair<std::string, std::string>> rank_variables(const JobInfo& job, int local_rank);

/// The whole environment of one child: `parent` without variables of an
/// outer torchrun agent (TORCHELASTIC_*, ROLE_*), plus rank_variables().
Env rank_environment(const Env& parent, const JobInfo& job, int local_rank);

/// "NAME=value" strings for execve().
std::vector<std::string> to_envp(const Env& env);

}  // namespace gpudiag::launch
