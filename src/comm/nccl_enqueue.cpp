// One NCCL call for a CollCall (see nccl_enqueue.h).
#include "comm/nccl_enqueue.h"

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

}  // namespace gpudiag
