// A rank's job settings, read once: the job's shape, where and how its ranks
// meet (the store's address, the job token and secret, who serves the store),
// whether they meet through node leaders (the tree's mode, group size, ports),
// the address its ring is reached at, and the check's timeout. One function
// builds them from the command's options and the environment; the layers
// below (store/ joining, the tree's plan, the MPI planes) take the typed parts
// they need and read no variable themselves.
//
// A setting a job may never use is read but refused only when used: a
// malformed GPUDIAG_TREE stops a job that would meet through a store, not a
// one-rank run; a missing MASTER_ADDR stops a store job, not an MPI one; a
// GPUDIAG_SECRET_FILE is read only by a job that proves a secret. Such a
// setting is a `Checked<T>`: the value, or the one-line error and its remedy.
#pragma once

#include <optional>
#include <string>

#include "store/job_token.h"
#include "store/store_join.h"
#include "tree/tree.h"
#include "util/checked.h"
#include "util/env.h"
#include "world/discovery.h"

namespace gpudiag {

struct JobSettings {
  World world;       ///< the job's shape (discovery.h)
  std::string host;  ///< this host's short name
  double timeout_s = 0;
  StoreSettings store;
  Checked<TreeSettings> tree;
  /// Where peers reach this rank's host/tcp port: GPUDIAG_HOST_ADDR, else the
  /// local address routed towards MASTER_ADDR, else the host name.
  std::string ring_address;
  Env env;  ///< the snapshot read, for the report's environment lines
};

/// Reads everything once. Throws UsageError only for the job's shape (an
/// inconsistent RANK/WORLD_SIZE); the rest is refused when used.
JobSettings read_job_settings(const Env& env, double timeout_s);

/// The parts, for the launcher, which reads its own job's token and secret
/// and plans its node's tree from the same variables.
JobToken read_job_token(const Env& env);
/// Throws UsageError for an unreadable, empty, oversized or group/other-
/// accessible GPUDIAG_SECRET_FILE, or an oversized GPUDIAG_SECRET.
std::optional<JobSecret> read_job_secret(const Env& env);
/// Throws UsageError for a malformed GPUDIAG_TREE* or GPUDIAG_MPI_NODE_SIZE.
TreeSettings read_tree_settings(const Env& env);
/// Throws UsageError naming the variable to set.
StoreAddress read_store_address(const World& world, const Env& env);

/// The history folder (history/folder.h): `option` (--history DIR) when
/// given, else GPUDIAG_HISTORY; "" when neither is set (no records written).
std::string read_history_dir(const Env& env, const std::string& option);

/// "node[03-05,7],gpu1" -> "node03"; empty on a malformed list.
std::string slurm_first_host(const std::string& nodelist);

}  // namespace gpudiag
