#include "store/store_join.h"

#include <spdlog/spdlog.h>

#include <cctype>

#include "store/job_token.h"
#include "store/socket.h"
#include "store/tcp_store_client.h"
#include "store/torch_store.h"
#include "util/error.h"
#include "util/strings.h"
#include "world/host.h"

namespace gpudiag {

namespace {

/// Says once per job (rank 0 says it; the versions line of the report says
/// it again) that the store is unauthenticated, why, and what would help:
/// a secret, or, on torchrun's agent store, which cannot check one, another
/// launcher.
/// `agent_store`: 0 gpudiag's own store, 1 torchrun's agent, 2 gpudiag
/// launch's store in torch's protocol (a gpudiag subcommand run as a torch
/// program, with --no-python).
void say_unauthenticated(const World& world, const JoinedStore& j, int agent_store) {
  static bool said = false;
  if (said || world.rank != 0) return;
  said = true;
  spdlog::warn("rank {}: the store at {} is unauthenticated ({}): a local user who can reach it "
               "may forge records; {}",
               world.rank, j.store->address(), j.unauthenticated_why,
               agent_store == 2 ? "where that matters, run it as gpudiag launch ... -- SUBCOMMAND "
                                  "(not --no-python), whose ranks prove the job's secret"
               : agent_store == 1 ? "where that matters, start the job with gpudiag launch, whose "
                                    "store checks a job secret"
                                  : "set GPUDIAG_SECRET or GPUDIAG_SECRET_FILE on every rank");
}

}  // namespace

JoinedStore join_store(const World& world, const StoreSettings& settings, Deadline deadline,
                       bool as_leader, const TreeLayout* tree) {
  const auto& where = settings.address.get();
  // Every rank may hold sockets to many peers (the ring, the link test): take
  // the whole descriptor allowance. The server checks it can hold the job.
  net::raise_fd_limit();
  JoinedStore j;
  if (settings.server == StoreSettings::Server::torch_agent) {
    const std::string& prefix = settings.torch_prefix;
    j.store = std::make_unique<TorchStoreClient>(where.host, where.port, prefix, deadline);
    j.connect_again = [where, prefix](Deadline d, std::uint32_t) -> std::unique_ptr<Store> {
      return std::make_unique<TorchStoreClient>(where.host, where.port, prefix, d);
    };
    // gpudiag launch running gpudiag as a torch program (--no-python) offers
    // its store in torch's protocol too; its children carry GPUDIAG_LAUNCH_ID.
    const bool by_launch = settings.torch_by_launch;
    const std::string agent = by_launch ? "gpudiag launch, in torch's protocol" : "the torchrun agent";
    j.how = "joined the store at " + j.store->address() + " (served by " + agent + ")";
    j.unauthenticated_why = by_launch ? "torch's protocol has no authentication"
                                      : "torchrun's agent store cannot authenticate";
    j.served_by = (by_launch ? "gpudiag launch [" : "the torchrun agent [") + where.host + "]";
    say_unauthenticated(world, j, by_launch ? 2 : 1);
    return j;
  }
  const auto& token = settings.token;
  const auto& secret = settings.secret.get();
  const bool launcher_serves = settings.server == StoreSettings::Server::launcher;
  if (world.rank == 0 && !launcher_serves) {
    TcpStoreServerOptions o;
    o.port = where.port;
    o.token = token.value;
    o.world_size = world.size;
    if (secret) o.secret = secret->key;
    o.served_by = "rank 0 [" + short_hostname() + "]";
    o.owned_keys = true;  // no launcher here: connections without a rank report nothing
    o.deaths_from_connections = true;  // ... so the store reports a rank's lost connection
    if (as_leader) {
      // Node leaders' judges meet here; ranks meet in their nodes' stores,
      // whose leaders report deaths.
      o.launcher_clients = true;
      o.deaths_from_connections = false;
      if (tree) {  // the tree's root: judges claim their places (key_owners.h)
        o.tree_role = TreeStoreRole{TreeStoreRole::Kind::root, 0, *tree};
        o.own_process_trusted = true;
      }
      o.expected_clients = 3 * (world.size / std::max(1, world.local_size)) + 16;
    }
    j.server = std::make_unique<TcpStoreServer>(o);
  }
  const std::string key = secret ? secret->key : std::string();
  j.connect_again = [where, token = token.value, key](Deadline d,
                                                      std::uint32_t claim) -> std::unique_ptr<Store> {
    return std::make_unique<TcpStoreClient>(where.host, where.port, token, d, key, claim);
  };
  try {
    j.store = std::make_unique<TcpStoreClient>(
        where.host, where.port, token.value, deadline, key,
        !as_leader ? static_cast<std::uint32_t>(world.rank)
        : tree     ? storewire::node_claim(tree->node_of(world.rank))
                   : storewire::kNoRank);
  } catch (const Error& e) {
    if (!j.server) throw;
    throw UsageError("rank 0 serves the store on port " + std::to_string(where.port) +
                         " but cannot reach it through MASTER_ADDR=" + where.host + ": " + e.what(),
                     "set MASTER_ADDR to an address of rank 0's host");
  }
  j.how = std::string(j.server ? "serving" : "joined") + " the store at " + j.store->address() +
          (launcher_serves ? " (served by gpudiag launch"
           : j.server      ? " ("
                           : " (served by rank 0") +
          (j.server ? "" : "; ") + "address from " + where.from + ", token from " + token.source +
          (secret ? ", secret from " + secret->source : std::string(", no secret")) + ")";
  j.served_by = launcher_serves ? "gpudiag launch [" + where.host + "]" : "rank 0 [" + where.host + "]";
  j.authenticated = secret.has_value();
  if (!j.authenticated) {
    j.unauthenticated_why = "no GPUDIAG_SECRET or GPUDIAG_SECRET_FILE";
    say_unauthenticated(world, j, 0);
  }
  return j;
}

}  // namespace gpudiag
