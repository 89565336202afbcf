#include "rendezvous/store_join.h"

#include <spdlog/spdlog.h>

#include <cctype>

#include "rendezvous/job_token.h"
#include "rendezvous/socket.h"
#include "rendezvous/tcp_store_client.h"
#include "rendezvous/torch_store.h"
#include "util/error.h"
#include "util/strings.h"
#include "world/host.h"

namespace gpudiag {

namespace {

int parse_port(const std::string& v, const char* name) {
  auto p = parse_int(v);
  if (!p || *p < 1 || *p > 65535)
    throw UsageError(std::string(name) + "='" + v + "' is not a TCP port",
                     std::string("set ") + name + " to a free port between 1024 and 65535");
  return static_cast<int>(*p);
}

/// A port every task of a SLURM step computes alike, away from the usual
/// ones and below Linux's ephemeral range (32768-60999 by default), where a
/// server that asked the kernel for any free port may already listen.
int slurm_port(const Env& env) {
  auto job = parse_int(env.get_or("SLURM_JOB_ID", "0")).value_or(0);
  auto step = parse_int(env.get_or("SLURM_STEP_ID", "0")).value_or(0);
  return 20000 + static_cast<int>(((job * 131 + step * 7) % 12000 + 12000) % 12000);
}

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

std::string slurm_first_host(const std::string& nodelist) {
  // First entry: up to a ',' outside brackets.
  std::string first;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    first += c;
  }
  auto open = first.find('[');
  if (open == std::string::npos) return first;
  auto close = first.find(']', open);
  if (close == std::string::npos) return {};
  std::string range = first.substr(open + 1, close - open - 1);
  range = range.substr(0, range.find(','));
  range = range.substr(0, range.find('-'));
  if (range.empty() || !std::all_of(range.begin(), range.end(), ::isdigit)) return {};
  return first.substr(0, open) + range + first.substr(close + 1);
}

StoreAddress store_address(const World& world, const Env& env) {
  auto addr = env.get("MASTER_ADDR");
  auto port = env.get("MASTER_PORT");
  if (addr && port) return {*addr, parse_port(*port, "MASTER_PORT"), "MASTER_ADDR/MASTER_PORT"};
  if (world.launcher == Launcher::slurm && !addr && !port) {
    auto list = env.get_or("SLURM_STEP_NODELIST", env.get_or("SLURM_JOB_NODELIST", ""));
    auto host = slurm_first_host(list);
    if (host.empty())
      throw UsageError("cannot find the first host of SLURM_STEP_NODELIST='" + list + "'",
                       "set MASTER_ADDR and MASTER_PORT");
    return {host, slurm_port(env), "the first host of the SLURM step and a port from its job id"};
  }
  throw UsageError(std::string(addr ? "MASTER_PORT" : "MASTER_ADDR") + " is not set, and " +
                       std::to_string(world.size) + " ranks from " + world.source +
                       " need it to meet",
                   "export MASTER_ADDR=<rank 0's host> MASTER_PORT=<a free port> on every rank, "
                   "or start them with gpudiag launch, torchrun or mpirun");
}

JoinedStore join_store(const World& world, const Env& env, Deadline deadline, bool as_leader,
                       const TreeLayout* tree) {
  auto where = store_address(world, env);
  // Every rank may hold sockets to many peers (the ring, the link test): take
  // the whole descriptor allowance. The server checks it can hold the job.
  net::raise_fd_limit();
  JoinedStore j;
  if (env.get_or("TORCHELASTIC_USE_AGENT_STORE", "") == "True") {
    std::string prefix = "gpudiag/" + env.get_or("TORCHELASTIC_RUN_ID", "run") + "/" +
                         env.get_or("TORCHELASTIC_RESTART_COUNT", "0") + "/";
    j.store = std::make_unique<TorchStoreClient>(where.host, where.port, prefix, deadline);
    j.connect_again = [where, prefix](Deadline d, std::uint32_t) -> std::unique_ptr<Store> {
      return std::make_unique<TorchStoreClient>(where.host, where.port, prefix, d);
    };
    // gpudiag launch running gpudiag as a torch program (--no-python) offers
    // its store in torch's protocol too; its children carry GPUDIAG_LAUNCH_ID.
    const bool by_launch = !env.get_or("GPUDIAG_LAUNCH_ID", "").empty();
    const std::string agent = by_launch ? "gpudiag launch, in torch's protocol" : "the torchrun agent";
    j.how = "joined the store at " + j.store->address() + " (served by " + agent + ")";
    j.unauthenticated_why = by_launch ? "torch's protocol has no authentication"
                                      : "torchrun's agent store cannot authenticate";
    j.served_by = (by_launch ? "gpudiag launch [" : "the torchrun agent [") + where.host + "]";
    say_unauthenticated(world, j, by_launch ? 2 : 1);
    return j;
  }
  auto token = job_token(env);
  auto secret = job_secret(env);
  const bool launcher_serves = env.get_or("GPUDIAG_STORE", "") == "launcher";
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
