// StorePlane: the control plane over a rendezvous Store (gpudiag's TCP store
// or torchrun's agent store), for jobs that MPI did not start.
//
// Keys (the store is private to one job; see job_token.h):
//   claim/<r>     counter: a second process claiming rank r gets 2 -> duplicate RANK
//   hello/<r>     "pid <p> on <host> (local rank <l>)": who holds rank r
//   phase/<r>     the phase rank r last entered
//   bye/<r>       rank r ended in order (set as its plane goes away); a store
//                 served by rank 0 announces the death of a rank whose
//                 connection closes without it
//   cp/<n>/<r>    rank r's record at checkpoint n
//   cp/<n>/digest rank 0's digest of checkpoint n (see plane.h): the missing
//                 ranks and their notes, the abort, the check's review
//   failures      counter of announced failures
//   failure/<n>   the n-th announcement (1-based), "<kind>\t<text>": kind
//                 "failed" when a rank (or a process that lost a rank claim)
//                 reports its own failure, "died" when a launcher saw a rank's
//                 process end
//   dead/<r>      set by a launcher before it announces rank r's death, so a
//                 checkpoint stops waiting for r at once
//   cp/<n>/judge  (node 0's store, tree only) what the root left for rank 0
//                 alone beside the digest (Gathered::judge_share)
//   cp/<n>/name   the checkpoint's name, for the leader (tree only)
//   cp/<n>/wait   how long the checkpoint waits for stragglers, in ms (tree only)
//   need/<n>/<r>  records rank r reads from other nodes, "5,17", or "*" for
//                 every record (the report's table on rank 0; tree only)
//   node/<k>      one read shared by a node's ranks (Plane::read_on_node): the
//                 text its reader left; node/<k>/claim, the counter that
//                 picked the first rank to ask as its reader
//   server        set by gpudiag's server itself: who serves it, "rank 0 [node1]"
//   duplicates    set by gpudiag's server itself: ranks claimed by a second
//                 connection, which may not write them (key_owners.h)
// A request the store answers at once that goes unanswered for a window (2 s,
// more in large jobs), twice, means the store stopped: every later call fails
// with "<server> serving the store at ADDR stopped answering".
// A checkpoint sets its own key, then waits for everyone's in short slices,
// looking at `failures` between slices so a dead or failed peer ends the wait
// at once instead of at the deadline.
// Values read back are not trusted (store_limits.h): the counter is parsed
// with bounds and capped by the world size, texts are cut to one line.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "plane/plane.h"
#include "store/store.h"

namespace gpudiag {

struct StorePlaneIdentity {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  std::string host;
  int pid = 0;
  /// Who serves the store ("rank 0", "gpudiag launch", "the torchrun agent"),
  /// until the store says itself (its `server` key: "rank 0 [node1]").
  std::string served_by;
  /// The rank's --timeout (0: not known): a store that leaves a request
  /// unanswered is confirmed stopped only after a second request waits up to a
  /// quarter of it (store_plane_detail.h answered()), so a busy one is slow, not dead.
  double timeout_s = 0;
  /// In a tree (tree/tree.h, relay.h): the store is this node's, its
  /// leader judges, and every rank (rank 0 too) reads the digest. The node's
  /// ranks are [node_first, node_last]; records of other ranks come from the
  /// digest (rank 0's) or are asked of the leader (need/<n>/<r>). A rank waits
  /// for the digest `judge_grace` past its deadline (the levels above decide
  /// later); without one it knows only its node.
  bool tree = false;
  int node_first = 0, node_last = -1;
  std::chrono::milliseconds judge_grace{5000};
};

/// Claims the rank in `store`. Throws UsageError when another process holds it
/// (duplicate RANK), after telling the others.
std::unique_ptr<Plane> make_store_plane(std::unique_ptr<Store> store, const StorePlaneIdentity& me,
                                        Deadline deadline);

/// The first half of the next checkpoint of a store plane: sets this rank's
/// record now, and the next gather_all() finds it set instead of setting it.
/// For the scale simulator (src/sim), which drives thousands of ranks from a
/// few threads: every rank publishes, then the judge and the others gather.
void publish_record(Plane& store_plane, const std::string& name, const std::string& mine,
                    const std::vector<int>& need = {},
                    Deadline deadline = Deadline::after(std::chrono::seconds(2)));

enum class FailureKind { failed, died };

/// Announces a failure to every rank of the job (a launcher uses it with
/// `died` when a rank's process ends); returns its number. A death names the
/// `rank` that died, so checkpoints stop waiting for it at once.
std::int64_t publish_failure(Store& store, const std::string& why, Deadline deadline,
                             FailureKind kind, int rank = -1);

}  // namespace gpudiag
