// The host/tcp communicator (tcp_ring.h), shared by its two source files:
// tcp_ring.cpp holds the byte-moving engines (the streamed ring, recursive
// halving and doubling) and the float interface; tcp_collectives.cpp holds
// run(), which lays every collective of collective.h out as a schedule for
// those engines.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "comm/collective.h"
#include "comm/tcp_links.h"

namespace gpudiag {

/// One step of a streamed ring schedule: what this rank sends to the next
/// rank and what it receives from the previous one. The steps of a schedule
/// flow back to back; only the dependencies named here hold them back.
struct RingStep {
  const char* out = nullptr;  ///< bytes to send
  std::size_t out_bytes = 0;
  /// Receive step whose bytes `out` forwards: the send goes no further than
  /// that step has stored (and reduced). -1: `out` is ready at once.
  int out_after = -1;
  char* in = nullptr;  ///< where the received bytes end up
  std::size_t in_bytes = 0;
  /// This rank's contribution: in[i] = op(with[i], received[i]) as elements
  /// become whole (`in` may equal `with`). Null: the bytes land as they are.
  const char* with = nullptr;
  bool finish = false;  ///< the reduction completes here: avg divides as it lands
  /// Send step that must be over before bytes may land in `in` (it sends
  /// what `in` held before: a reused scratch slot). -1: none.
  int in_after = -1;
};

class TcpCollectives : public Communicator {
 public:
  TcpCollectives(Links links, RingListener& listener, const RingPeers& peers);

  std::string name() const override { return "host/tcp"; }
  void all_reduce_sum(float* data, std::size_t count, Deadline deadline) override;
  void all_gather(float* data, std::size_t count, Deadline deadline) override;
  void broadcast(float* data, std::size_t count, int root, Deadline deadline) override;
  void barrier(Deadline deadline) override;
  void open_links(Deadline deadline) override;
  void send_recv(int peer, const float* out, float* in, std::size_t count,
                 Deadline deadline) override;
  void run(const CollCall& call, Deadline deadline) override;

 private:
  // Engines (tcp_ring.cpp).
  void stream_ring(const std::vector<RingStep>& steps, DType type, RedOp op, Deadline deadline,
                   const char* what, SideCopy* side = nullptr);
  void halving_doubling(const char* src, char* data, std::size_t count, DType type, RedOp op,
                        Deadline deadline);

  // Collectives on bytes (tcp_collectives.cpp); `count` in elements as in
  // collective.h, src/dst as the call's send/recv.
  void all_reduce(const char* src, char* dst, std::size_t count, DType type, RedOp op,
                  Deadline deadline);
  void reduce_scatter(const char* src, char* dst, std::size_t count, DType type, RedOp op,
                      Deadline deadline);
  void reduce(const char* src, char* dst, std::size_t count, DType type, RedOp op, int root,
              Deadline deadline);
  void all_gather_bytes(const char* src, char* dst, std::size_t bytes, Deadline deadline);
  void broadcast_bytes(const char* src, char* dst, std::size_t bytes, int root, Deadline deadline);
  void alltoall(const char* src, char* dst, std::size_t bytes, Deadline deadline);
  void sendrecv(const char* src, char* dst, std::size_t bytes, Deadline deadline);

  int mod(long x) const { return static_cast<int>(((x % size_) + size_) % size_); }

  RingListener& listener_;
  RingPeers peers_;
  Link ring_;
  std::vector<Link> partners_;
  std::vector<Link> mesh_;  ///< to every rank, once open_links ran
  int rank_, size_;
  std::vector<char> tmp_;      ///< received bytes waiting to be reduced
  std::vector<char> scratch_;  ///< partial results in flight, staged blocks
};

/// in[from, to) = op(with, incoming) over bytes [from, to) of whole elements,
/// then the avg's division when `finish`.
void land_reduced(char* in, const char* with, const char* incoming, std::size_t from,
                  std::size_t to, DType type, RedOp op, bool finish, int nranks);

}  // namespace gpudiag
