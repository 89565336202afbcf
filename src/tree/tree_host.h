// Whether a job's ranks meet through node leaders (tree/tree.h), and
// what a leader runs.
//
// GPUDIAG_TREE=auto (the default) turns the tree on at 2,048 ranks and more,
// =on at any size, =off never. It needs ranks laid out in blocks of
// LOCAL_WORLD_SIZE (RANK = node * LOCAL_WORLD_SIZE + LOCAL_RANK: torchrun's,
// gpudiag launch's and SLURM's default order); otherwise the job runs flat
// (with a warning when GPUDIAG_TREE=on). Local rank 0 of each node is its
// leader: it serves the node's store on 127.0.0.1 (port GPUDIAG_TREE_PORT,
// default MASTER_PORT + 1) and runs the node's judge; the first node of each
// group of GPUDIAG_TREE_GROUP_NODES nodes (default 128; only past that many
// nodes) also serves the group's store on GPUDIAG_TREE_PORT + 1 and runs its
// judge; past that many groups, the first node of each supergroup of that
// many groups also serves its store on GPUDIAG_TREE_PORT + 2, and so on a
// level up (TreeLayout::levels(): a port per level); node 0 also runs the
// root's judge on the job's store. Each judge says where its store is at the
// root (tree/group/<g>, tree/group2/<s>, ...), where its children read it
// once. Every rank joins only its node's store; judges reach other stores by
// claiming their place (no rank).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"
#include "store/tcp_store_server.h"
#include "tree/tree.h"
#include "world/discovery.h"

namespace gpudiag {

struct TreePlan {
  TreeLayout layout;
  int node = 0;
  int node_port = 0;  ///< the node's store, on 127.0.0.1
  int group_port = 0;  ///< a group's store; a judge of level l serves on node_port + l
  std::string why;  ///< "GPUDIAG_TREE=on", "2048 ranks (GPUDIAG_TREE=auto)"
};

/// nullopt: the job runs flat.
std::optional<TreePlan> plan_tree(const World& w, const TreeSettings& settings, int master_port);

/// Under an MPI launcher: node leaders from MPI_Comm_split_type (GPUDIAG_TREE
/// as above; no layout needed, MPI knows the nodes), grouped past
/// TreeSettings::group_nodes nodes as the store's tree is.
bool mpi_tree_wanted(const World& w, const TreeSettings& settings);
/// GPUDIAG_TREE_GROUP_NODES, or the default (128): nodes under one judge.
int tree_group_nodes(const TreeSettings& settings);

struct TreeConnect {
  std::string token, secret;
  /// A new connection to the job's store, claiming `claim` at its handshake
  /// (storewire: node k, group g or the root; key_owners.h).
  std::function<std::unique_ptr<Store>(std::uint32_t claim)> root;
  std::string address;  ///< where this host is reached (a group store's address)
  std::string host;     ///< this host's name, for messages
  std::string leader = "local rank 0";  ///< who leads, for messages
  /// The node's store reports a rank whose connection closes without its
  /// goodbye; off when a launcher reports its ranks' deaths (with the exit
  /// status or signal, which says more).
  bool deaths_from_connections = true;
  double timeout_s = 60;
  /// A new reviewer for each judge this host runs (the job's:
  /// sweep::job_reviewer); required.
  std::function<std::unique_ptr<TreeReviewer>()> reviewer;
};

/// What a leader runs: its node's store and judge, a group's, the root's.
/// Destroyed after the rank's own plane: waits (bounded) for its judges to
/// see every child say goodbye, then stops them and the stores.
class TreeHost {
 public:
  TreeHost(const TreePlan& plan, TreeConnect connect);
  ~TreeHost();
  TreeHost(const TreeHost&) = delete;
  TreeHost& operator=(const TreeHost&) = delete;

 private:
  /// `within`: how long to keep trying. The judge publishes its address only
  /// once it listens, so a refusal there means it is gone (a few seconds).
  std::unique_ptr<Store> connect_at(const std::string& host_port, std::uint32_t claim,
                                    double within_s);
  /// Where judge `index` of `level` said its store is (at the root), connected.
  std::unique_ptr<Store> connect_judge(int level, int index, std::uint32_t claim, double within_s);
  /// The stores above a judge of `level` over this node, past its parent:
  /// each connected when first used, the root's last.
  std::vector<std::unique_ptr<Store>> stores_beyond(int level, std::uint32_t claim);
  void run_node();
  void run_group(int level);
  void run_root();
  TreePlan plan_;
  TreeConnect c_;
  std::unique_ptr<TcpStoreServer> node_server_;
  std::vector<std::unique_ptr<TcpStoreServer>> group_servers_;  ///< by level - 1
  void start(std::function<void()> what);
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable ended_;
  int done_ = 0;  ///< judges that ended
  std::vector<std::thread> threads_;
  std::mutex addresses_mu_;
  std::map<std::pair<int, int>, std::string> addresses_;  ///< judges' stores by (level, index)
};

}  // namespace gpudiag
