// host/tcp: collectives over a ring of TCP connections, for jobs without MPI.
//
// Each rank listens on an ephemeral port (published in its exchange record),
// connects to the next rank and accepts the previous one (and, in worlds of a
// power of two, to and from its partners at XOR distances 1, 2, 4, ...); a
// hello names the caller's rank, job token and purpose (tcp_links.h). The
// all-reduce is bandwidth-optimal either way: a streamed ring (reduce-scatter
// then all-gather, each rank moving 2(n-1)/n of the buffer each way), or for
// buffers up to 16 MiB recursive halving then doubling, the same bytes in
// fewer, pairwise steps (tcp_ring.cpp). run() does every collective of
// collective.h, any type and reduction, on the same ring (tcp_collectives.cpp);
// alltoall goes pairwise over the mesh of open_links(). Written by hand
// because no library here does TCP collectives without an MPI launcher.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "store/socket.h"

namespace gpudiag {

/// The listening side, opened before the exchange so peers can connect at once.
class RingListener {
 public:
  RingListener();  ///< every interface, an ephemeral port
  int port() const { return port_; }
  net::Fd& fd() { return fd_; }
  /// Connections of this job that arrived before anyone waited for them,
  /// by (rank, channel): a fast peer may open the next channel while this
  /// rank still accepts the previous one.
  std::map<std::pair<int, int>, net::Fd>& early() { return early_; }

 private:
  net::Fd fd_;
  int port_ = 0;
  std::map<std::pair<int, int>, net::Fd> early_;
};

struct RingPeers {
  int rank = 0;
  std::vector<std::string> endpoints;  ///< "host:port" per rank
  std::vector<std::string> labels;     ///< "rank 3 [node2-1]" per rank, for messages
  std::string token;                   ///< the job token; both ends must agree
};

/// Connects to the next rank and accepts the previous one by `deadline`,
/// giving up early when `abort_check` has a reason (a peer announced dead).
/// Throws TimeoutError / Error naming the neighbour. `listener` must outlive
/// the communicator: open_links() accepts the link test's connections on it.
std::unique_ptr<Communicator> make_tcp_ring(RingListener& listener, const RingPeers& peers,
                                            Deadline deadline, const AbortCheck& abort_check = {});

}  // namespace gpudiag
