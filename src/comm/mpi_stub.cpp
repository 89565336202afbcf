// comm/mpi.h for a build without MPI.
#include "comm/mpi.h"
#include "util/error.h"

namespace gpudiag {

bool built_with_mpi() { return false; }
std::string mpi_library_version() { return {}; }

MpiSession::MpiSession() {
  throw Error(ExitCode::usage, "an MPI launcher started gpudiag, but it was built without MPI",
              "rebuild with libopenmpi-dev installed, or start it with gpudiag launch / torchrun");
}
MpiSession::~MpiSession() = default;
bool MpiSession::barrier_within(Deadline) { return false; }
std::unique_ptr<Communicator> make_mpi_host_communicator(MpiSession&) { return nullptr; }

}  // namespace gpudiag
