// Whether a failed attempt is started again (--max-restarts, --restart-policy).
//
// A restart helps a fault that may not come back: a rank killed, a peer's
// connection lost, a node's hiccup. It does not help a workload error: the
// same exception raised at the same line of the user's code comes back in
// every attempt and only burns the allocation. So, under the default policy
// (on-new-error), when the rank the launcher names as an attempt's cause
// raised the same exception (type and message) at the same place (the
// user's innermost frame: file and line) as the cause of the attempt just
// before, on the same rank, the launcher stops restarting and says so. An
// exception is known from the rank's error file (torch's @record, or the
// launcher's Python startup file, which records an uncaught exception
// itself). What is not a workload's error never counts: a rank killed by a
// signal, an exception that is a peer's failure seen from here (root_cause.h),
// an error of the node (a GPU's ECC error, NCCL's system error, a stale file
// handle), a replica divergence, or an exception with no place. A job that
// --hang-timeout stopped is told the same way by where it stopped
// (hang_point()): the rank the others waited for, stuck in its own Python
// code at one innermost frame; the same rank at the same frame in two
// attempts in a row is a workload hang. `always` restarts every failure, as
// torchrun does.
#pragma once

#include <optional>
#include <string>

#include <vector>

#include "launch/error_file.h"
#include "launch/exit_status.h"
#include "launch/stacks.h"

namespace gpudiag::launch {

enum class RestartPolicy { on_new_error, always };

/// "on-new-error", "always".
const char* restart_policy_name(RestartPolicy policy);

/// The exception an attempt failed of, as the restart policy compares it.
struct AttemptError {
  int rank = -1;        ///< global rank
  /// Its local rank: under rounds (rounds.h) a node's global ranks are
  /// renumbered, so the node's launcher compares its own slot; -1: the rank.
  int local = -1;
  std::string message;  ///< "ValueError: step 2 went wrong on rank 1"
  std::string file;     ///< the user's innermost frame's file, as the traceback names it
  int line = 0;         ///< and its line
  /// Not an exception: the attempt hung (hang_point()), the rank the others
  /// waited for at that frame of its own code; the message is empty.
  bool hang = false;

  /// The same rank raised the same exception (or hung) at the same place.
  bool same_as(const AttemptError& other) const {
    const bool same_rank =
        local >= 0 && other.local >= 0 ? local == other.local : rank == other.rank;
    return same_rank && hang == other.hang && message == other.message && file == other.file &&
           line == other.line;
  }
  /// "train.py:39": the file's last component and the line.
  std::string place() const;
};

/// Whether an exception's message is an error of the node or of the
/// infrastructure rather than of the workload's code: a GPU that failed (ECC,
/// fallen off the bus, busy or unavailable), NCCL's system, internal or remote
/// errors, a file system's stale handle or I/O error, a peer's failure seen
/// from here (consequence_of_a_peer), or a replica divergence (every rank
/// raises it; the node holding the wrong parameters is the cause).
bool not_the_workloads(const std::string& message);

/// The AttemptError of global rank `rank`, which ended as `how` and whose
/// error file says `error`: nullopt when it did not exit by itself (a
/// signal), wrote nothing, or its exception cannot be told again (unreadable,
/// no place, not_the_workloads()).
std::optional<AttemptError> attempt_error(int rank, const std::optional<ExitStatus>& how,
                                          const std::optional<ChildError>& error);

/// Where a job --hang-timeout stopped stood, from its hang report's stacks:
/// the one rank the others waited for (as group_stacks() names it), a Python
/// rank not waiting (on a peer, a collective or its GPU: neither its Python
/// nor its native frames name a wait) whose innermost frame is its own code
/// (no library's); that frame as an AttemptError with `hang` set. nullopt
/// otherwise: several ranks or none waited for, a stack from another node (no
/// frames), a rank inside a library or native code.
std::optional<AttemptError> hang_point(const std::vector<RankStack>& stacks);

/// What the launcher does after an attempt.
enum class AfterAttempt {
  done,             ///< it succeeded
  restart,          ///< it failed and is started again
  repeated_error,   ///< it failed as the attempt before it did: a workload error, not restarted
  repeated_hang,    ///< it hung where the attempt before it did: a workload hang, not restarted
  out_of_restarts,  ///< it failed with no restart left
  not_restartable,  ///< it ended by a signal to the launcher or a deadline
};
/// "done", "restart", "repeated_error", "repeated_hang", "out_of_restarts",
/// "not_restartable".
const char* after_attempt_name(AfterAttempt after);

/// One attempt's end, as the launcher decided it (observer.h hears it).
struct AttemptEnd {
  int attempt = 0;
  int exit_status = 0;
  std::optional<AttemptError> error;
  AfterAttempt then = AfterAttempt::done;
  std::string policy;  ///< restart_policy_name()
  std::string line;    ///< what the launcher said of a repeated error or hang, else ""
  /// Why this node was at fault in the attempt (node_fault.h), else "".
  std::string node_fault;
};

/// Decides after each attempt, remembering the one before.
class RestartJudge {
 public:
  RestartJudge(RestartPolicy policy, int max_restarts) : policy_(policy), max_(max_restarts) {}
  /// Attempt `attempt` (0 first) ended with `exit_status`; `restartable`: by a
  /// rank's failure (not a signal to the launcher or a deadline); `error`: its
  /// cause's exception, if one can be told again.
  AttemptEnd decide(int attempt, int exit_status, bool restartable,
                    std::optional<AttemptError> error);

 private:
  RestartPolicy policy_;
  int max_;
  std::optional<AttemptError> last_;  ///< the attempt just before's
  int last_attempt_ = -1;
};

}  // namespace gpudiag::launch
