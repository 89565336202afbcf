// One NCCL call for a CollCall (see nccl_enqueue.h), and what the meter
// must know of how NCCL launches it: on the caller's thread or not, and how
// much of NCCL's work FIFO it takes.
#include "comm/nccl_enqueue.h"

#include <algorithm>

namespace gpudiag {

namespace {

nccl_abi::Result grouped_p2p(const NcclApi& api, const CollCall& c, int t, const NcclTarget& to) {
  const std::size_t block = c.count * dtype_size(c.type);
  const auto* send = static_cast<const char*>(c.send);
  auto* recv = static_cast<char*>(c.recv);
  nccl_abi::Result r = api.GroupStart();
  auto pair_with = [&](int peer_to, const char* s, int from, char* d) {
    if (r == nccl_abi::kSuccess) r = api.Send(s, c.count, t, peer_to, to.comm, to.stream);
    if (r == nccl_abi::kSuccess) r = api.Recv(d, c.count, t, from, to.comm, to.stream);
  };
  if (c.coll == Coll::sendrecv && c.peer >= 0)
    pair_with(c.peer, send, c.peer, recv);
  else if (c.coll == Coll::sendrecv)
    pair_with((to.rank + 1) % to.size, send, (to.rank + to.size - 1) % to.size, recv);
  else
    for (int p = 0; p < to.size && r == nccl_abi::kSuccess; ++p)
      pair_with(p, send + p * block, p, recv + p * block);
  const nccl_abi::Result end = api.GroupEnd();
  return r == nccl_abi::kSuccess ? end : r;
}

}  // namespace

nccl_abi::Result nccl_enqueue(const NcclApi& api, const CollCall& c, const NcclTarget& to) {
  const int t = nccl_dtype(c.type), op = nccl_redop(c.op);
  switch (c.coll) {
    case Coll::all_reduce:
      return api.AllReduce(c.send, c.recv, c.count, t, op, to.comm, to.stream);
    case Coll::all_gather:
      return api.AllGather(c.send, c.recv, c.count, t, to.comm, to.stream);
    case Coll::reduce_scatter:
      return api.ReduceScatter(c.send, c.recv, c.count, t, op, to.comm, to.stream);
    case Coll::broadcast:
      return api.Broadcast(c.send, c.recv, c.count, t, c.root, to.comm, to.stream);
    case Coll::reduce:
      return api.Reduce(c.send, c.recv, c.count, t, op, c.root, to.comm, to.stream);
    case Coll::alltoall:
      return api.AlltoAll ? api.AlltoAll(c.send, c.recv, c.count, t, to.comm, to.stream)
                          : grouped_p2p(api, c, t, to);
    case Coll::sendrecv:
      return grouped_p2p(api, c, t, to);
  }
  return nccl_abi::kSuccess;
}

/// Inline: a collective at one rank (src/enqueue.cc taskAppend:
/// ncclLaunchOneRank on the caller's thread, ncclAlltoAll included; sends and
/// receives always join a group, which goes to a thread), and before NCCL
/// 2.23 every call once connected (v2.22.3-1 src/group.cc
/// ncclGroupEndInternal: a thread only for init, finalize or preconnect).
bool nccl_launches_inline(const NcclApi& api, int version, const CollCall& c, int size) {
  const bool p2p = c.coll == Coll::sendrecv || (c.coll == Coll::alltoall && !api.AlltoAll);
  return (size == 1 && !p2p) || (version > 0 && version < 22300);
}

/// NCCL's launch waits on the device when its work FIFO is full
/// (src/enqueue.cc uploadWork -> waitWorkFifoAvailable; NCCL_WORK_FIFO_BYTES,
/// 1 MiB by default, src/init.cc), and the FIFO empties only as kernels end,
/// never behind a held gate. Each send/recv peer of a call takes an
/// ncclDevWorkP2p (48 bytes, src/include/device.h; ncclAlltoAll one per rank,
/// taskAppend), so a batch of p2p calls keeps to a quarter of the FIFO; a
/// collective's work is one small ncclDevWorkColl.
int nccl_gate_batch(const CollCall& c, int size, int most) {
  const int peers = c.coll == Coll::alltoall ? size : c.coll == Coll::sendrecv ? 2 : 0;
  if (peers == 0) return most;
  constexpr int kFifoBudget = (1 << 20) / 4, kP2pWorkBytes = 48;
  return std::clamp(kFifoBudget / (kP2pWorkBytes * std::max(peers, 1)), 1, std::max(most, 1));
}

}  // namespace gpudiag
