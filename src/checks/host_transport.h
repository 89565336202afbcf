// How the host backend reaches its peers: MPI when an MPI launcher started the
// job, else TCP connections between the ranks. prepare() runs in the device
// phase (before the exchange) and returns what peers need to reach this rank;
// connect() runs in the communicator phase with everyone's records.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "checks/record.h"
#include "comm/communicator.h"

namespace gpudiag {

class MpiSession;

class HostTransport {
 public:
  virtual ~HostTransport() = default;
  virtual std::string name() const = 0;  ///< "host/mpi", "host/tcp"
  /// The endpoint to publish in this rank's record ("" if none needed).
  virtual std::string prepare() = 0;
  /// `abort_check` (a peer's announced failure or death) ends the wait early.
  virtual std::unique_ptr<Communicator> connect(const std::vector<RankRecord>& peers, int rank,
                                                Deadline deadline,
                                                const AbortCheck& abort_check = {}) = 0;
};

std::unique_ptr<HostTransport> make_mpi_transport(MpiSession& session);
/// A world of one rank.
std::unique_ptr<HostTransport> make_self_transport();
/// A TCP ring; peers reach this rank at `advertise_host` (an address of this
/// host that the others can route to) and must present the same job token.
std::unique_ptr<HostTransport> make_tcp_transport(std::string advertise_host, std::string token);

}  // namespace gpudiag
