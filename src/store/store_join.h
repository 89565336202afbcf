// Finding and joining the job's rendezvous store when MPI did not start us.
//
// Where it is: MASTER_ADDR:MASTER_PORT; under a SLURM step without them, the
// first host of SLURM_STEP_NODELIST and a port derived from the job and step
// ids (every task computes the same). Who serves it:
//   - torchrun with TORCHELASTIC_USE_AGENT_STORE=True: the agent (c10d
//     TCPStore); ranks join as clients under a key prefix of the run;
//   - gpudiag launch (GPUDIAG_STORE=launcher): the launcher of node 0;
//   - otherwise rank 0 serves it on MASTER_PORT, every interface.
// Rank 0 connects to its own server through MASTER_ADDR, which proves that
// MASTER_ADDR names this host before anyone else waits on it.
//
// The job secret (GPUDIAG_SECRET, GPUDIAG_SECRET_FILE; store/job_token.h)
// is required of every connection to gpudiag's store when set. Without one,
// or on torchrun's agent store (which cannot authenticate), the job still
// runs: rank 0 says once that the store is unauthenticated, and
// JoinedStore::authenticated is false for the job report to say so.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "store/store.h"
#include "tree/tree.h"
#include "store/tcp_store_server.h"
#include "store/job_token.h"
#include "util/checked.h"
#include "world/discovery.h"

namespace gpudiag {

/// Where the job's store listens (MASTER_ADDR/MASTER_PORT, or derived from
/// SLURM's step).
struct StoreAddress {
  std::string host;
  int port = 0;
  std::string from;  ///< "MASTER_ADDR/MASTER_PORT" or how it was derived
};

/// How a rank of a job that meets through a store joins it, as read once
/// (settings/job_settings.h).
struct StoreSettings {
  Checked<StoreAddress> address;
  JobToken token;
  /// GPUDIAG_SECRET or GPUDIAG_SECRET_FILE; nullopt inside when neither is set.
  Checked<std::optional<JobSecret>> secret;
  enum class Server {
    rank0,        ///< rank 0 serves gpudiag's store
    launcher,     ///< gpudiag launch serves it (GPUDIAG_STORE=launcher)
    torch_agent,  ///< torchrun's agent store, or gpudiag launch's in torch's protocol
  } server = Server::rank0;
  /// Under torch's agent store: the keys' prefix, gpudiag/<run id>/<restart>/.
  std::string torch_prefix;
  /// The agent store is gpudiag launch's (GPUDIAG_LAUNCH_ID set), not torchrun's.
  bool torch_by_launch = false;
};

struct JoinedStore {
  std::unique_ptr<TcpStoreServer> server;  ///< set when this process serves it
  std::unique_ptr<Store> store;
  std::string how;  ///< "rank 0 serves tcp://vm:29500", ...
  /// Who serves it, as far as this rank knows: "rank 0 [MASTER_ADDR]",
  /// "gpudiag launch [MASTER_ADDR]", "the torchrun agent [MASTER_ADDR]".
  std::string served_by;
  /// True when every connection to the store proves the job's secret (and
  /// the store proved it to this rank); false when any local user who can
  /// reach the store and compute the token may write to it.
  bool authenticated = false;
  /// Why it is unauthenticated, for the report: "no GPUDIAG_SECRET or
  /// GPUDIAG_SECRET_FILE", "torchrun's agent store cannot authenticate".
  std::string unauthenticated_why;
  /// Another connection to the same store, claiming `claim` at its handshake
  /// (storewire: a tree judge's place, or kNoRank): what a node leader's
  /// judges use (tree/tree_host.h).
  std::function<std::unique_ptr<Store>(Deadline, std::uint32_t claim)> connect_again;
};

/// `as_leader`: this rank joins as its node's leader (tree/tree_host.h): its
/// connection claims its node (`tree`'s node of its rank; its rank meets the
/// others in its node's store), and rank 0's server serves the tree's root
/// (key_owners.h set_tree: places claimed, not launchers; its own process
/// trusted) and does not take a closed connection for a rank's death.
JoinedStore join_store(const World& world, const StoreSettings& settings, Deadline deadline,
                       bool as_leader = false, const TreeLayout* tree = nullptr);

}  // namespace gpudiag
