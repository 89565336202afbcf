// host/tcp: collectives over a ring of TCP connections, for jobs without MPI.
//
// Each rank listens on an ephemeral port (published in its exchange record),
// connects to the next rank and accepts the previous one; a 16-byte hello
// (magic, rank, job token hash) makes sure the connection is the expected
// neighbour of the same job. The all-reduce is the bandwidth-optimal ring:
// a reduce-scatter then an all-gather, n-1 steps each, every step sending one
// segment to the next rank while receiving another from the previous, so
// each rank moves 2(n-1)/n of the buffer in each direction. Written by hand
// because no library here does TCP collectives without an MPI launcher.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "rendezvous/socket.h"

namespace gpudiag {

/// The listening side, opened before the exchange so peers can connect at once.
class RingListener {
 public:
  RingListener();  ///< every interface, an ephemeral port
  int port() const { return port_; }
  net::Fd& fd() { return fd_; }

 private:
  net::Fd fd_;
  int port_ = 0;
};

struct RingPeers {
  int rank = 0;
  std::vector<std::string> endpoints;  ///< "host:port" per rank
  std::vector<std::string> labels;     ///< "rank 3 [node2-1]" per rank, for messages
  std::string token;                   ///< the job token; both ends must agree
};

/// Connects to the next rank and accepts the previous one by `deadline`.
/// Throws TimeoutError / Error naming the neighbour.
std::unique_ptr<Communicator> make_tcp_ring(RingListener& listener, const RingPeers& peers,
                                            Deadline deadline);

}  // namespace gpudiag
