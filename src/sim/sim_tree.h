// The tree simulator's parts (simulator.h): the plan of who is absent, the
// processes for the root and for the stores of the judges of every level
// with their judges (sim_tree.cpp, sim_judges.cpp), and the processes that
// simulate blocks of nodes (sim_nodes.cpp).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tree/relay.h"
#include "sim/sim_common.h"
#include "sim/simulator.h"

namespace gpudiag::sim {

inline constexpr const char* kTreeToken = "gpudiag-sim";
inline constexpr const char* kTreeCheckpoints[] = {"exchange", "communicator", "all-reduce",
                                                   "barrier", "report"};
inline constexpr int kCheckpointCount = 5;
/// Stopped and dead ranks are last seen at the communicator checkpoint; dead
/// judges' hosts die after it.
inline constexpr int kLastForFaulty = 1;

enum class Fate { fine, missing, stop, die };

/// Who is absent, and from when: the same on every process (forked from one plan).
struct Plan {
  TreeLayout layout;
  std::vector<Fate> fate;            ///< by rank
  std::set<int> missing_leaders;     ///< nodes whose leader never reports
  /// Nodes that host judges and die (their leader and every judge they
  /// host: a group's, and a supergroup's when they are its first node).
  std::set<int> dead_hosts;
  int kill_at = kLastForFaulty + 1;  ///< the checkpoint dead judges miss first

  bool leader_gone(int node, int seq) const {
    return missing_leaders.count(node) || (seq >= kill_at && dead_hosts.count(node));
  }
  /// Judge `index` of `level` (>= 1) is gone at checkpoint `seq`: its host died.
  bool judge_gone(int level, int index, int seq) const {
    return seq >= kill_at && dead_hosts.count(layout.nodes_of(level, index).first);
  }
  bool arrives(int r, int seq) const {
    if (leader_gone(layout.node_of(r), seq)) return false;
    return fate[r] == Fate::fine || (fate[r] != Fate::missing && seq <= kLastForFaulty);
  }
  /// Ranks every live rank should name at the end.
  std::vector<int> absent() const {
    std::vector<int> out;
    for (int r = 0; r < layout.world; ++r)
      if (!arrives(r, kCheckpointCount - 1)) out.push_back(r);
    return out;
  }
};

inline std::chrono::milliseconds ms(double seconds) {
  return std::chrono::milliseconds(static_cast<long>(seconds * 1000));
}

Plan make_plan(const SimOptions& o);
/// The ranks of --drift-node's node that report at the exchange (`reports`),
/// ascending; throws UsageError when the node is not in the job or none of
/// its ranks reports (its drift could never be named).
std::vector<int> drift_ranks(const SimOptions& o, int nodes, int per_node,
                             const std::function<bool(int)>& reports);
RelayOptions relay_options(const Plan& p, const SimOptions& o, RelayLevel level, int index,
                           int height = 1);

/// Where every judge's store listens: the root's, and by level (1..) and index.
struct Ports {
  int root = 0;
  std::vector<std::vector<int>> level;  ///< level[l][j]; level[0] unused
  /// The store of judge j of level l (the root's above the top level).
  int of(int l, int j) const {
    return l >= static_cast<int>(level.size()) ? root : level[static_cast<std::size_t>(l)][static_cast<std::size_t>(j)];
  }
};

/// A relay's connections to its parent's store and (connected when first
/// used) to the stores of the judges above that, the root's last.
struct Uplinks {
  std::unique_ptr<Store> above;
  std::vector<std::unique_ptr<Store>> beyond;
  void fill(RelayOptions& o) const;
};
/// For judge `index` of `level` (0: node `index`'s leader).
Uplinks uplinks(const Plan& p, const Ports& ports, const std::string& secret, int level, int index);

void root_process(const Plan& p, const SimOptions& o, const std::string& secret, int out,
                  int control);
/// A process serving the stores of the judges [j0, j1) of `level` and running
/// them; writes their ports on one line, then "bytes N" (sent up), then its
/// peak RSS in KiB once released.
void judges_process(const Plan& p, const SimOptions& o, const std::string& secret,
                    const Ports& ports, int level, int j0, int j1, int out, int control);
/// Simulates nodes [k0, k1): their ranks, stores and leaders. Writes
/// "named a b c" (the absent ranks every live rank here named), "bytes R N"
/// (ranks' bytes with their leaders, leaders' with their parents), then its
/// peak RSS in KiB. Every such process meets the others at `step` before
/// each checkpoint's leaders collect.
void nodes_process(const Plan& p, const SimOptions& o, const std::string& secret,
                   const Ports& ports, int k0, int k1, int out, StepBarrier& step);

}  // namespace gpudiag::sim
