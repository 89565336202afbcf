// The tree simulator's parts (simulator.h): the plan of who is absent, the
// processes for the root and the group stores with their judges
// (sim_tree.cpp), and the processes that simulate blocks of nodes
// (sim_nodes.cpp).
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tree/relay.h"
#include "sim/simulator.h"

namespace gpudiag::sim {

inline constexpr const char* kTreeToken = "gpudiag-sim";
inline constexpr const char* kTreeCheckpoints[] = {"exchange", "communicator", "all-reduce",
                                                   "barrier", "report"};
inline constexpr int kCheckpointCount = 5;
/// Stopped and dead ranks are last seen at the communicator checkpoint; dead
/// group judges die after it.
inline constexpr int kLastForFaulty = 1;

enum class Fate { fine, missing, stop, die };

/// Who is absent, and from when: the same on every process (forked from one plan).
struct Plan {
  TreeLayout layout;
  std::vector<Fate> fate;            ///< by rank
  std::set<int> missing_leaders;     ///< nodes whose leader never reports
  std::map<int, int> dead_judges;    ///< group -> its judge's node
  int kill_at = kLastForFaulty + 1;  ///< the checkpoint dead judges miss first

  bool leader_gone(int node, int seq) const {
    if (missing_leaders.count(node)) return true;
    for (const auto& [g, k] : dead_judges)
      if (k == node && seq >= kill_at) return true;
    return false;
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
RelayOptions relay_options(const Plan& p, const SimOptions& o, RelayLevel level, int index);
void root_process(const Plan& p, const SimOptions& o, const std::string& secret, int out,
                  int control);
void group_process(const Plan& p, const SimOptions& o, const std::string& secret, int root_port,
                   int g0, int g1, int out, int control);
/// Simulates nodes [k0, k1): their ranks, stores and leaders. Writes
/// "named a b c" (the absent ranks every live rank here named), "bytes R N"
/// (ranks' bytes with their leaders, leaders' with their parents), then its
/// peak RSS in KiB.
void nodes_process(const Plan& p, const SimOptions& o, const std::string& secret, int root_port,
                   const std::vector<int>& group_ports, int k0, int k1, int out);

}  // namespace gpudiag::sim
