// How the launchers of a multi-node job meet before any rank starts, when
// node ranks or the node count are not fixed by hand (torchrun's c10d
// rendezvous, done in gpudiag's own store).
//
// Every launcher ADDs 1 to `rdzv/arrivals` (its arrival number a, from 1) and
// sets `rdzv/node/<a>` to its view of the job: host, launcher pid,
// --nproc-per-node, --nnodes MIN:MAX and --node-rank if given. Then it polls
// (a parked WAIT on `rdzv/size`, at most 100 ms) until the round closes:
//   - every view seen is compared with the first; a difference in
//     --nproc-per-node or --nnodes is a one-line UsageError naming both values
//     and both hosts, which every launcher derives alike from the same views;
//   - once MIN launchers arrived it waits up to last_call seconds for more (at
//     once when MAX arrived); the first launcher to ADD `rdzv/close` writes
//     `rdzv/size` = min(arrivals, MAX), and arrivals past it are told the
//     round closed without them;
//   - if MIN never arrive within join_timeout: a TimeoutError naming who came.
// Node ranks are then assigned alike by everyone: a given --node-rank is
// kept, the launcher serving the store takes node 0 if nobody claimed it,
// the others take the lowest free ranks in arrival order; two nodes
// claiming one rank is an error naming both. Each launcher ADDs `rdzv/acks`
// once it has its verdict, so the one serving the store can wait for every
// other launcher to have read the verdict before an error takes the store down.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "store/store.h"

namespace gpudiag::launch {

/// One launcher's view of the job, published at the rendezvous.
struct NodeView {
  std::string host;
  int pid = 0;
  int nproc = 1;
  int min_nodes = 1;
  int max_nodes = 1;
  /// --node-rank as given; -1 when it is to be assigned.
  int node_rank = -1;
  /// This launcher serves the rendezvous store (the endpoint is its host).
  bool serves = false;
  /// Its node was at fault in the attempt before (round_meeting.h).
  bool faulty = false;

  /// "host (launcher pid N)", for messages.
  std::string who() const;
};

std::string encode_view(const NodeView& v);
/// nullopt for text that is not a view (a foreign or damaged record).
std::optional<NodeView> decode_view(const std::string& text);

/// The first disagreement between `views[0]` and a later view, as a one-line
/// message naming both values and both launchers; nullopt when they agree.
std::optional<std::string> disagreement(const std::vector<NodeView>& views);

/// Node ranks for `views` (in arrival order): given ones kept, node 0 to the
/// view that serves the store if free, the others the lowest free ones in
/// arrival order. Throws UsageError when two nodes give
/// the same --node-rank or one is outside [0, views.size()).
std::vector<int> assign_node_ranks(const std::vector<NodeView>& views);

struct Membership {
  int node_rank = 0;
  int nnodes = 1;
  std::vector<NodeView> nodes;  ///< by arrival
};

struct RendezvousTimes {
  double join_timeout_s = 600;
  double last_call_s = 3;
};

/// Meets the other launchers in `store` (see above). `where` ("host:port")
/// names the rendezvous in messages. Throws UsageError (disagreement, a rank
/// claimed twice, a closed or full round) or TimeoutError (MIN never came).
Membership meet_nodes(Store& store, const NodeView& mine, RendezvousTimes times,
                      const std::string& where);

/// Nodes numbered by hand (--node-rank on each, Meeting::by_hand) start their
/// ranks at once, so their views are compared beside the job: `mine` is set
/// as `rdzv/hand/<node rank>` and an ADD to `rdzv/hand-claim/<node rank>`
/// finds a rank given twice; then the views of nodes 0..nnodes-1 are read
/// every 100 ms until all are there. Returns the first disagreement (or a
/// rank claimed twice) as a one-line message, nullopt once every view agrees
/// or when `stop()` turns true. `serving`: this launcher holds the store, so
/// on a disagreement it waits (at most 3 s) until every node present has
/// acknowledged it.
std::optional<std::string> watch_hand_numbered(Store& store, const NodeView& mine, int nnodes,
                                               bool serving, const std::function<bool()>& stop);

/// For the launcher that serves the store: waits (at most `seconds`) until
/// every launcher that arrived in round `prefix` has acknowledged its verdict.
void wait_for_acks(Store& store, double seconds, const std::string& prefix = "rdzv/");

}  // namespace gpudiag::launch
