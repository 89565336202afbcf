// The job a launcher runs, once every default is filled in, and the
// environment each of its children gets.
//
// resolve_job() settles what the options left open: the master address
// (127.0.0.1 on one node), the port (a free one on one node, 29500 on
// several), the token ranks present to the rendezvous store (see
// store/job_token.h), and a launch id.
// rank_environment() then gives each child the torchrun-compatible variables
// (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
// GROUP_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) plus GPUDIAG_LAUNCH_ID and
// GPUDIAG_TOKEN. See docs/launch.md for the token rules and their limits.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "launch/options.h"
#include "tree/tree.h"
#include "util/checked.h"
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
  /// --report-node: the host that takes node 0 at a rendezvous ("" the
  /// launcher serving the store).
  std::string report_node;
  /// --master-port was given; otherwise the launcher chose master_port, and a
  /// LaunchObserver that binds a store server may replace it with its own.
  bool port_given = false;
  /// What every rank of the job presents to the store (not a secret).
  std::string token;
  /// Marks RANK etc. as set by this launcher (not left over in a shell).
  std::string launch_id;
  /// Further variables for every child (e.g. GPUDIAG_STORE=launcher from a
  /// LaunchObserver that serves the store); rank_variables() still win.
  std::vector<std::pair<std::string, std::string>> extra_env;
  /// The launchers meet at master_addr:master_port before any rank starts
  /// (Meeting::rendezvous): node_rank (-1 until assigned) and nnodes are
  /// settled there by a LaunchObserver (node_rendezvous.h).
  bool rendezvous = false;
  /// The elastic range's MIN (nnodes is MAX until the rendezvous settles it).
  int min_nodes = 1;
  /// --rdzv-id, or "none".
  std::string run_id = "none";
  /// Which attempt this is (0 first) and how many restarts are allowed; the
  /// children see them as TORCHELASTIC_RESTART_COUNT / _MAX_RESTARTS.
  int restart_count = 0;
  int max_restarts = 0;
  /// A torch program's children (entry.h torch_variables): torchrun's
  /// variables, the async error variable of the torch in use, OMP_NUM_THREADS
  /// when the launcher sets it ("" not), the attempt's error-file folder.
  bool torch_children = false;
  /// TORCHELASTIC_USE_AGENT_STORE: the launcher's store serves torch's
  /// clients (torchrun: under the static rendezvous, its default).
  bool agent_store = false;
  std::string async_error_variable, omp_num_threads, error_dir;
  /// torchrun's --role: ROLE_NAME of a torch program's children.
  std::string role = "default";
  /// GPUDIAG_TREE and its settings, read with the rest of the job's.
  Checked<TreeSettings> tree = TreeSettings{};

  int world_size() const { return nnodes * nproc_per_node; }
  /// Global rank of the child with local rank `local_rank` on this node.
  int rank_of(int local_rank) const { return node_rank * nproc_per_node + local_rank; }
};

/// Fills in defaults for validated options. `env` is the launcher's
/// environment. The token is GPUDIAG_TOKEN when set and non-empty; else, on
/// one node, 128 random bits; else "rdzv-<id>" with --rdzv-id; else
/// read_job_token(env) (SLURM job and step, torchrun run id, or a fixed name),
/// which every node computes alike. Under a rendezvous the master address and
/// port are the endpoint's (--rdzv-endpoint, default port 29400; else
/// --master-addr and --master-port, default 29500).
/// Picking a free port binds a socket; throws gpudiag::Error if it cannot.
JobInfo resolve_job(const LaunchOptions& options, const Env& env);

/// A free TCP port on this host (bound to port 0, read back, released).
/// Another process may take it before the store binds it; the window is short.
int pick_free_port();

/// The variables gpudiag launch sets for one child, in a fixed order.
std::vector<std::pair<std::string, std::string>> rank_variables(const JobInfo& job, int local_rank);

/// The whole environment of one child: `parent` without variables of an
/// outer torchrun agent (TORCHELASTIC_*, ROLE_*), plus job.extra_env, plus
/// rank_variables().
Env rank_environment(const Env& parent, const JobInfo& job, int local_rank);

/// "NAME=value" strings for execve().
std::vector<std::string> to_envp(const Env& env);

}  // namespace gpudiag::launch
