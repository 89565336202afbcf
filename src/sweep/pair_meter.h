// One pair of ranks measured in one sweep round, on a communicator of its own
// (two ranks: nothing else of the job is involved, so a pair that fails or
// hangs fails alone, within its deadline).
//
// host/tcp: a two-rank TCP ring between the pair (tcp_ring.h) whose job token
// is the job's with the round appended, so a late connection from another
// round is refused as not one of ours. nccl: a two-rank NCCL communicator
// whose unique id the lower rank makes and hands over at the round's
// checkpoint. On either, the pair exchanges a buffer both ways at once
// (sendrecv): the first exchange is checked element by element and timed;
// from its time the lower rank picks how many more fit in a quarter of the
// pair's deadline (at least one, at most --iters) and tells the other, so a
// slow link is measured rather than timed out; the fastest of those is the
// pair's time (the link test takes the median, link_run.h; a sweep that
// excludes nodes takes what the link can do, not the noise of a moment).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "util/deadline.h"
#include "util/env.h"

namespace gpudiag::sweep {

struct PairPeer {
  int rank = 0;
  std::string label;     ///< "rank 3 [node2-1]"
  std::string endpoint;  ///< host/tcp: host:port
  std::string pair_id;   ///< nccl: the lower rank's unique id for this round
};

struct PairOutcome {
  bool ok = false;
  double gbps = 0;  ///< GB/s each way
  std::string why;
};

class PairMeter {
 public:
  virtual ~PairMeter() = default;
  virtual std::string name() const = 0;  ///< "host/tcp", "nccl"
  /// What peers need to reach this rank (host/tcp: host:port; "" for nccl).
  virtual std::string endpoint() const = 0;
  /// This round's id, made by the lower rank of a pair ("" for host/tcp).
  virtual std::string make_pair_id() = 0;
  virtual std::unique_ptr<Communicator> connect(const PairPeer& me, const PairPeer& other,
                                                int round, Deadline deadline) = 0;
  virtual Workspace& workspace() = 0;
};

/// host/tcp: listens on `advertise_host` (an ephemeral port) for the job's token.
std::unique_ptr<PairMeter> make_tcp_pair_meter(const std::string& advertise_host,
                                               const std::string& token);

/// nccl: on GPU `ordinal` (selected and tested by the caller), with the
/// libnccl.so.2 of `nccl_lib` ("" the search's).
std::unique_ptr<PairMeter> make_nccl_pair_meter(const std::string& nccl_lib);

struct PairSpec {
  std::uint64_t bytes = 4u << 20;
  int iters = 5;
  double timeout_s = 30;  ///< the pair's whole measurement
};

/// Measures this rank's pair; never throws (a failure is the outcome).
PairOutcome measure_pair(PairMeter& meter, const PairPeer& me, const PairPeer& other, int round,
                         const PairSpec& spec);

}  // namespace gpudiag::sweep
