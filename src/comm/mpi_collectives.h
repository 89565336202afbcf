// What the host/mpi files share, for builds with MPI only (it includes
// <mpi.h>): polling requests against a deadline (defined in mpi_session.cpp)
// and the collectives of collective.h over MPI_COMM_WORLD
// (mpi_collectives.cpp).
#pragma once

#include <mpi.h>

#include <climits>
#include <cstddef>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <string>

#include "comm/collective.h"
#include "comm/communicator.h"
#include "util/deadline.h"

namespace gpudiag {

/// Names the call in messages. Built only when a message needs it: on a call
/// of a few bytes, formatting the name would cost a tenth of the call.
using CallName = std::function<std::string()>;

/// Throws Error (exit status 1) naming the call and MPI's error string when
/// `rc` is not MPI_SUCCESS (MPI_COMM_WORLD returns errors, it does not abort).
void check_mpi(int rc, const CallName& what);

/// Posts a receive of `count` from `from` into reqs[0], then a send of
/// `count` to `to` into reqs[1]. When the send cannot start, the receive is
/// cancelled (reqs[0] is left set if it had already matched) and the send's
/// error thrown; the caller keeps its buffers while reqs[0] is set.
void start_pair(MPI_Request (&reqs)[2], void* in, const void* out, int count, MPI_Datatype type,
                int from, int to, int tag, const CallName& what);

/// Polls `req` until done, the deadline, or an abort_check reason. On the way
/// out by an error `req` is still pending: MPI may still use its buffers.
void wait_request(MPI_Request& req, const CallName& what, Deadline deadline,
                  const AbortCheck& abort_check);
inline void wait_request(MPI_Request& req, const std::string& what, Deadline deadline,
                         const AbortCheck& abort_check) {
  wait_request(req, CallName([&] { return what; }), deadline, abort_check);
}

/// Carries the original error out of wait_pair when requests stay pending.
struct PendingRequests {
  std::exception_ptr error;
};

/// Both requests of a send/receive pair; testing either progresses both. On
/// an error, pending requests are cancelled and given a moment to finish; if
/// one is still pending MPI may still use its buffer, and PendingRequests
/// carries the error out instead.
void wait_pair(MPI_Request (&reqs)[2], const CallName& what, Deadline deadline,
               const AbortCheck& abort_check);
inline void wait_pair(MPI_Request (&reqs)[2], const std::string& what, Deadline deadline,
                      const AbortCheck& abort_check) {
  wait_pair(reqs, CallName([&] { return what; }), deadline, abort_check);
}

/// Every Coll, DType and RedOp of collective.h over MPI_COMM_WORLD, with
/// nccl-tests' buffer layouts and in-place offsets, on host memory.
class MpiCollectives {
 public:
  /// The most elements one MPI call takes: its counts are ints.
  static constexpr std::size_t kMaxCount = INT_MAX;

  MpiCollectives();
  ~MpiCollectives();  ///< frees the user ops unless MPI is already finalized
  MpiCollectives(const MpiCollectives&) = delete;
  MpiCollectives& operator=(const MpiCollectives&) = delete;

  /// One call, blocking until this rank's part is done. Counts above
  /// `max_count` run as several calls of at most `max_count` elements each
  /// (a parameter so a test can make the pieces small).
  void run(const CollCall& call, Deadline deadline, const AbortCheck& abort_check,
           std::size_t max_count = kMaxCount);
  /// After run() threw: MPI may still read or write the call's buffers.
  bool buffers_in_flight() const { return in_flight_; }

 private:
  struct Job;
  void start(Job& job, MPI_Request (&reqs)[2], std::size_t off, std::size_t len, int step,
             const CallName& what);
  MPI_Op op_for(DType type, RedOp op) const;
  char* stage(std::size_t bytes);

  int rank_ = 0, size_ = 1;
  /// User ops by DType, then sum prod max min (avg reduces as sum); MPI_OP_NULL
  /// where MPI's own op is used.
  MPI_Op user_ops_[std::size(kAllDTypes)][4];
  bool in_flight_ = false;
  /// Staging memory, kept from call to call so a timed loop does not pay for
  /// fresh pages each time; given up (left to MPI) when a call stays pending.
  std::unique_ptr<char[]> stage_;
  std::size_t stage_bytes_ = 0;
};

}  // namespace gpudiag
