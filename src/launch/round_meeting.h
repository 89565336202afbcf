// One round of the launchers' rendezvous, under a key prefix of its own
// ("rdzv/<round>/"), so the rounds of one job live side by side in one store.
//
// The protocol is node_rendezvous.h's (arrival numbers by ADD, views, the
// first to ADD `close` writes `size`), with two additions:
//   - a launcher whose last attempt showed its node at fault (node_fault.h)
//     says so in its view (the word `fault`) and writes why under
//     `fault/<arrival>`; the round closes once MIN launchers *not* at fault
//     arrived and last_call passed (at once when MAX arrived of any kind), or,
//     when fewer than MIN healthy ones came, at join_timeout with every
//     arrival;
//   - once closed, every launcher derives alike, from the same views, which
//     nodes at fault are left out: in arrival order, each while at least MIN
//     nodes remain; the others stay in and are said to.
// A launcher that arrives after the round closed, or past MAX, is told it is
// late (never an error here: the caller waits for the next round). Every
// value read from the store is bounded and validated: a count is clamped, a
// view must decode, a reason is cut and cleaned.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "launch/node_rendezvous.h"
#include "store/store.h"

namespace gpudiag::launch {

/// A node at fault in a round: its view and why.
struct FaultyNode {
  NodeView node;
  std::string why;
};

struct RoundOutcome {
  /// The round closed, or had MAX nodes, before this launcher arrived.
  bool late = false;
  std::string late_why;  ///< "closed with 2 node(s) (a, b) before this node joined"
  /// give_up() turned true before the round closed.
  bool gave_up = false;
  /// This launcher runs in the round (not late, not left out).
  bool admitted = false;
  int node_rank = -1;
  int nnodes = 0;
  std::vector<NodeView> nodes;      ///< admitted, by arrival
  std::vector<FaultyNode> left_out; ///< at fault and left out
  std::vector<FaultyNode> kept;     ///< at fault, but kept to stay at MIN
};

/// Meets the other launchers in round `prefix` ("rdzv/3/"). `fault`: why this
/// node is at fault ("" it is not). `where` names the endpoint in messages.
/// `give_up` is asked on every pass (at least every 100 ms). Throws
/// UsageError (a disagreement, a rank claimed twice) or TimeoutError (MIN
/// never came within join_timeout).
RoundOutcome meet_round(Store& store, const NodeView& mine, const std::string& fault,
                        RendezvousTimes times, const std::string& where, const std::string& prefix,
                        const std::function<bool()>& give_up = {});

/// Which of `faulty` (indices into `views`) are left out: in order, each while
/// at least `min_nodes` of `views` remain. Pure; the same on every launcher.
std::vector<bool> leave_out(std::size_t views, const std::vector<std::size_t>& faulty,
                            int min_nodes);

}  // namespace gpudiag::launch
