// MPI, used only when an MPI launcher started this process: the session
// (MPI_Init_thread/MPI_Finalize as RAII) and the host/mpi communicator, whose
// collectives are non-blocking (MPI_Iallreduce, MPI_Ibarrier) and polled with
// MPI_Test against a deadline, because a blocking MPI call cannot time out.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"

namespace gpudiag {

/// "Open MPI v4.1.4, ..." (first line of MPI_Get_library_version); empty when
/// built without MPI. Safe before MPI_Init.
std::string mpi_library_version();
bool built_with_mpi();

class MpiSession {
 public:
  /// MPI_Init_thread. Throws Error if MPI is not built in or fails to start.
  MpiSession();
  /// MPI_Finalize, unless abandon() was called.
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Skip MPI_Finalize at exit: a peer is stuck, and finalize would wait for it.
  void abandon() { abandoned_ = true; }
  /// MPI_Ibarrier polled until `deadline`; false if it did not complete.
  bool barrier_within(Deadline deadline);

 private:
  int rank_ = 0, size_ = 1;
  bool abandoned_ = false;
};

std::unique_ptr<Communicator> make_mpi_host_communicator(MpiSession& session);

}  // namespace gpudiag
