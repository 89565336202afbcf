// The scale simulator: N simulated ranks, each a real StorePlane, run through
// the check's checkpoint sequence, in one of two shapes.
//
// Flat (--flat): every rank a real TcpStoreClient of one real TcpStoreServer
// (configured as `gpudiag launch` hosts it: world size, token, a random job
// secret) in a child process, rank 0 the judge. Up to ~65,000 ranks: the
// simulator's own process then runs out of descriptors (20,000 here).
//
// Tree (the default; tree/tree.h, relay.h): ranks on nodes of 8, a
// real Relay per node as its leader, nodes in groups of 128 under a real
// group Relay, past 128 groups groups in supergroups of 128 under a real
// Relay one level up (and so on: --group-nodes sets the fan-out), one root
// Relay. Sharing a process: a node's ranks, its leader
// and its store (a MemoryStore: the node's loopback hop is not simulated with
// sockets), in worker processes of a block of nodes each. Real sockets: every
// leader's TcpStoreClient to its group's TcpStoreServer, every group judge's
// to its parent's. The group stores and their judges run in store processes
// (several groups each, like the hosts that serve them; each level's apart);
// the root's in one of its own; each reports its peak RSS. Faults beyond the ranks': leaders that
// never report (--missing-leaders) and group judges that die after the
// communicator checkpoint (--dead-judges: their store and judge go away, and
// with them their own node's leader), whose leaders then report to the root
// (or to their supergroup's judge, with 3 levels), and supergroup judges
// whose host dies likewise (--dead-upper-judges: with it the judge of its
// first group and that group's first node's leader; those groups' judges
// report to the root, and that group's nodes past both lost judges).
//
// With --sweep (sim_sweep.cpp) the tree carries gpudiag sweep's rounds
// instead of the check's checkpoints: the real planner at rank 0, made-up
// measurements with one slow node (--slow-node), a line a round with the
// control plane's time; it passes when that node alone is excluded.
//
// A small pool of threads drives the ranks, not a thread per rank: at each
// checkpoint every live rank first publishes its record (publish_record), then
// rank 0 judges (waits for the records, reads them all, publishes the digest),
// then every other rank gathers, finding the digest already there. Faults:
// --missing K ranks join but never reach a checkpoint; --stop K reach the
// first two checkpoints, note the phase they are in and stop; --die K do the
// same, then the simulated launcher announces their deaths as it does for a
// killed rank. With --nccl-roots N the ranks carry the check's NCCL unique
// ids for N bootstrap roots and each says whether it got them all after the
// exchange (a line on stderr). Every rank's record carries a small
// fingerprint; with --drift-node K the ranks of simnode<K> run another GPU
// driver, and every rank that reached the exchange must have a line
// "drift: simnode<K> (ranks a-b) ..." in its report's fingerprint block (a
// line on stderr says how many did), in the tree found only by comparing
// the groups' summaries at the root. In the tree the last rank of each
// process's block keeps the check's own bookkeeping of the others
// (checks/peer_book.h) and a line on stderr gives its largest size ("a
// rank's check state at most N KiB"). The last line sums it up:
//   sim: N ranks, K checkpoints, T s, store peak RSS M MiB (all stores A MiB),
//   bytes through the store B, missing named: X/Y
// (M: the largest store process; B: every level's keys and values.)
// Before it, in the tree, a line a level of stores counts every request the
// stores served, polls and retries included (sim_traffic.h: "sim: traffic at
// level L ..."), and a warning says when a checkpoint's ranks named more
// ranks missing than were absent (the machine too busy for the wait). The
// first line says what the machine allows (sim_limits.h); a run that needs
// more descriptors than that stops at once, saying how to get them.
// GPUDIAG_SIM_DEBUG=1 shows the judges' info lines (lost judges, hops up).
#pragma once

#include <cstdint>
#include <string>

namespace gpudiag::sim {

struct SimOptions {
  int ranks = 1024;
  int missing = 0, stop = 0, die = 0;
  int threads = 8;
  /// Each checkpoint's wait, as `check --timeout`; gpudiag-sim's default is 2 s,
  /// or a second per 40,000 ranks past 80,000 (sim_main.cpp: a step runs
  /// its nodes in turn, and the wait must outlast a step).
  double timeout_s = 2.0;
  int record_bytes = 600;  ///< a rank's record, about a real one's size
  /// Every rank reads every record, as checkpoints did before the digest.
  bool all_to_all = false;
  bool flat = false;  ///< one store, rank 0 the judge
  // The tree's shape and faults.
  int per_node = 8, group_nodes = 128;
  int missing_leaders = 1, dead_judges = 1;
  /// Judges of each level above the groups (supergroups, ...) whose hosts
  /// die after the communicator checkpoint (with 3 levels or more); -1: as
  /// many as dead_judges.
  int dead_upper_judges = -1;
  int workers = 4;      ///< processes simulating nodes
  int store_procs = 4;  ///< processes serving the group stores (the root has its own)
  /// The check's NCCL backend with this many bootstrap roots
  /// (GPUDIAG_NCCL_ROOTS=N, comm/nccl_roots.h): the ranks NCCL's rule names
  /// put a root's id in their exchange records, and every rank assembles all
  /// of them after the exchange as the check does; 0: the host backend.
  int nccl_roots = 0;
  /// Node K (host simnode<K>, 0-based) runs another GPU driver: every rank
  /// still there must name it ("drift: simnode<K> (ranks a-b) ..."); -1 none.
  int drift_node = -1;
  /// gpudiag sweep's control plane instead of the check's (sim_sweep.cpp):
  /// the real planner through the tree, the measurements made up, node
  /// `slow_node` slow (-1: one two thirds into the pool), planning with
  /// --time-budget seconds.
  bool sweep = false;
  int slow_node = -1;
  double time_budget_s = 1;
};

struct SimResult {
  int ranks = 0, checkpoints = 0;
  double seconds = 0;
  double store_peak_rss_mib = 0, all_stores_rss_mib = 0;
  std::uint64_t bytes = 0;      ///< keys and values through the store, all ranks
  int named = 0, expected = 0;  ///< absent ranks every live rank named, of those absent
  /// With nccl_roots: ranks that assembled every root's id, of the ranks
  /// that reached the exchange.
  int roots_ok = 0, roots_of = 0;
  /// The largest check state one sampled rank held (checks/peer_book.h).
  std::uint64_t rank_state_bytes = 0;
  /// With drift_node: ranks whose exchange report named it, of the ranks
  /// that reached the exchange; and the line they had to have.
  int drift_named = 0, drift_of = 0;
  std::string drift_line;
  std::string summary() const;
};

SimResult run_simulation(const SimOptions& o);
SimResult run_flat(const SimOptions& o);
SimResult run_tree(const SimOptions& o);
/// --sweep: named is 1 of 1 when exactly the slow node was excluded, as SLOW.
SimResult run_sweep(const SimOptions& o);
/// --sweep from main: runs it, prints its last line, returns the exit status.
int sweep_main(const SimOptions& o);

}  // namespace gpudiag::sim
