// The simulator's sweep mode (sim_sweep.cpp): the root and the group stores
// with their judges (sim_sweep.cpp), the processes of nodes whose rank 0 runs
// the sweep's planner (sim_sweep_nodes.cpp).
#pragma once

#include <string>
#include <vector>

#include "sim/sim_tree.h"
#include "sim/simulator.h"

namespace gpudiag::sim {

/// Simulates nodes [k0, k1) through the sweep until rank 0's plan says done.
/// Writes "ok <checkpoints>" (or "fail <why>"); the process holding rank 0
/// then writes the verdict: "excluded <host> <STATE> ..." or "excluded none".
void sweep_nodes(const Plan& p, const SimOptions& o, const std::string& secret, int root_port,
                 const std::vector<int>& group_ports, int k0, int k1, int out);

}  // namespace gpudiag::sim
