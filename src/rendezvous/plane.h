// The control plane: how the ranks of a check agree on what happened.
//
// A check is a fixed sequence of checkpoints that every rank passes through in
// the same order, whether its own work succeeded or not. At a checkpoint each
// rank contributes a record (a JSON string) and gets back every rank's, or
// learns which ranks did not arrive before the deadline. That is what lets a
// live rank say "rank 3 [node2-1] never reached the all-reduce; last seen in
// communicator" instead of hanging.
//
// Implementations: SinglePlane (world size 1), MpiPlane (MPI point-to-point,
// under mpirun/srun --mpi=pmix), StorePlane (a TCP rendezvous store).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/deadline.h"

namespace gpudiag {

class MpiSession;

struct Gathered {
  /// Indexed by rank; nullopt for a rank that did not arrive in time.
  std::vector<std::optional<std::string>> records;
  /// Indexed by rank, for missing ranks: what the plane knows of them
  /// ("pid 4242 on node2, last phase: all-reduce"); may be empty.
  std::vector<std::string> notes;
  /// Set when the wait ended early: a peer announced a failure, or the plane
  /// itself was lost ("lost the store at 10.0.0.1:29500: ...").
  std::optional<std::string> aborted;
  /// Ranks that did not arrive, ascending.
  std::vector<int> missing() const;
  bool complete() const { return missing().empty(); }
};

class Plane {
 public:
  virtual ~Plane() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Contributes `mine` at checkpoint `name` and returns every rank's record.
  /// Waits for the ranks in `wait_for` (every rank when empty); a rank already
  /// known to be gone is left out so later checkpoints do not wait for it again,
  /// though its record is still taken if it arrives. Never throws on a missing
  /// peer: the caller decides what that means.
  virtual Gathered gather_all(const std::string& name, const std::string& mine, Deadline deadline,
                              const std::vector<int>& wait_for = {}) = 0;
  /// Cheap progress note, readable by peers when this rank goes quiet.
  virtual void note_phase(const std::string& /*phase*/) {}
  /// Tells the peers this rank failed, so they stop waiting on it early.
  virtual void announce_failure(const std::string& /*why*/) {}
  /// A failure a peer or a launcher announced ("rank 3 [n2-1] failed in
  /// communicator: ..."), so waits can end early; nullopt if none known.
  virtual std::optional<std::string> peer_failure() { return std::nullopt; }
  /// A peer's death a launcher reported ("rank 2 [n1-2] (pid 42) was killed
  /// by SIGKILL ..."), which explains a lost connection best; nullopt if none.
  virtual std::optional<std::string> peer_death() { return std::nullopt; }
  /// Short name for the report: "single", "mpi", "store tcp://host:port".
  virtual std::string describe() const = 0;
};

std::unique_ptr<Plane> make_single_plane();
/// MPI_COMM_WORLD of an initialised session.
std::unique_ptr<Plane> make_mpi_plane(MpiSession& session);

}  // namespace gpudiag
