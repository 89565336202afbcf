// The collectives of collective.h over MPI (mpi_collectives.h): one
// non-blocking MPI call per collective, polled against the deadline by
// wait_request/wait_pair, on nccl-tests' buffer layouts.
//
// Types: MPI's own for the integers, float and double. half and bfloat16 have
// none: they travel as MPI_UINT16_T and reduce with user ops (MPI_Op_create,
// once per communicator) that call reduce_into(), so they round as NCCL does.
// int8 and uint8 reduce with such ops too: Open MPI 4.1's AVX ops (op/avx)
// saturate 8-bit sums (100 + 100 gives 127) where NCCL wraps.
// avg: MPI has none; the call reduces as sum and the ranks that hold the
// result divide with finish_avg().
//
// In place (nccl-tests' offsets, collective.h) maps onto MPI_IN_PLACE for
// all_gather and reduce (at the root), whose MPI layouts are the same;
// all_reduce and alltoall in place stage their input through a copy, which
// Open MPI's non-blocking calls run 2-3x faster than MPI_IN_PLACE. reduce_scatter's is not: MPI's in-place input is the whole
// receive buffer and its result lands at the start of it, not at block r, so
// it would overwrite block 0 on the other ranks; it reduces out of place into
// a staged block instead, copied to recv afterwards. sendrecv stages its send
// through a copy. Any other overlap of send and recv stages the send.
//
// MPI counts are ints (this Open MPI has no MPI-4 "_c" large-count calls), so
// a count above INT_MAX runs as several calls of at most INT_MAX elements on
// slices of the buffers, one after the other: all_gather's and alltoall's
// slices are rank blocks `count` elements apart, described by a resized
// contiguous type; reduce_scatter's become one MPI_Ireduce per rank, as MPI
// has no strided reduce-scatter.
#include "comm/mpi_collectives.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "comm/host_reduce.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag {

namespace {

constexpr int kSendRecvTag = 7302;

/// In collective.h's DType order.
MPI_Datatype mpi_type(DType t) {
  static const MPI_Datatype types[] = {MPI_INT8_T,  MPI_UINT8_T,  MPI_INT32_T,  MPI_UINT32_T,
                                       MPI_INT64_T, MPI_UINT64_T, MPI_UINT16_T, MPI_FLOAT,
                                       MPI_DOUBLE,  MPI_UINT16_T};
  return types[static_cast<int>(t)];
}

/// In collective.h's Coll order.
const char* mpi_call_name(Coll c, bool split_reduce_scatter) {
  if (c == Coll::reduce_scatter && split_reduce_scatter) return "MPI_Ireduce";
  static const char* names[] = {"MPI_Iallreduce",     "MPI_Iallgather", "MPI_Ireduce_scatter_block",
                                "MPI_Ibcast",         "MPI_Ireduce",    "MPI_Ialltoall",
                                "MPI_Isend/MPI_Irecv"};
  return names[static_cast<int>(c)];
}

template <DType T, RedOp Op>
void reduce_fn(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_into(inout, in, static_cast<std::size_t>(*len), T, Op);
}

template <DType T>
void create_ops(MPI_Op (&ops)[4]) {
  static_assert(T == DType::int8 || T == DType::uint8 || T == DType::half || T == DType::bfloat16);
  constexpr int kCommutative = 1;
  MPI_Op_create(&reduce_fn<T, RedOp::sum>, kCommutative, &ops[0]);
  MPI_Op_create(&reduce_fn<T, RedOp::prod>, kCommutative, &ops[1]);
  MPI_Op_create(&reduce_fn<T, RedOp::max>, kCommutative, &ops[2]);
  MPI_Op_create(&reduce_fn<T, RedOp::min>, kCommutative, &ops[3]);
}

/// Index into the user ops and MPI's: sum prod max min; avg reduces as sum.
int op_index(RedOp op) { return op == RedOp::avg ? 0 : static_cast<int>(op); }

bool overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

/// How one rank block (or a slice of one) is described to MPI: `count` of
/// `type`. A slice of a block whose neighbours sit `stride` elements apart is
/// one element of a resized contiguous type, freed after the call starts
/// (MPI keeps what a pending request needs).
struct Block {
  MPI_Datatype type;
  int count;
  bool owned = false;

  Block(MPI_Datatype base, std::size_t len, std::size_t stride, std::size_t elem_size) {
    if (len == stride) {
      type = base;
      count = static_cast<int>(len);
      return;
    }
    MPI_Datatype contig;
    MPI_Type_contiguous(static_cast<int>(len), base, &contig);
    MPI_Type_create_resized(contig, 0, static_cast<MPI_Aint>(stride * elem_size), &type);
    MPI_Type_free(&contig);
    MPI_Type_commit(&type);
    count = 1;
    owned = true;
  }
  ~Block() {
    if (owned) MPI_Type_free(&type);
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
};

}  // namespace

/// One call, resolved: what MPI is given, and the staging it needs.
struct MpiCollectives::Job {
  CollCall call;
  std::size_t elem = 1;
  MPI_Datatype type = MPI_BYTE;
  MPI_Op op = MPI_OP_NULL;
  bool in_place = false;       ///< MPI_IN_PLACE
  bool split = false;          ///< the count is above one call's limit
  const char* send = nullptr;  ///< call.send or its staged copy
  char* recv = nullptr;        ///< call.recv or the staged output
};

MpiCollectives::MpiCollectives() {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  for (auto& ops : user_ops_) std::fill(std::begin(ops), std::end(ops), MPI_OP_NULL);
  create_ops<DType::int8>(user_ops_[static_cast<int>(DType::int8)]);
  create_ops<DType::uint8>(user_ops_[static_cast<int>(DType::uint8)]);
  create_ops<DType::half>(user_ops_[static_cast<int>(DType::half)]);
  create_ops<DType::bfloat16>(user_ops_[static_cast<int>(DType::bfloat16)]);
}

MpiCollectives::~MpiCollectives() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto& ops : user_ops_)
    for (auto& op : ops)
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
}

char* MpiCollectives::stage(std::size_t bytes) {
  if (bytes > stage_bytes_) {
    stage_.reset();  // first, so the old and the new block are never both held
    stage_ = std::make_unique_for_overwrite<char[]>(bytes);
    stage_bytes_ = bytes;
  }
  return stage_.get();
}

MPI_Op MpiCollectives::op_for(DType type, RedOp op) const {
  if (MPI_Op user = user_ops_[static_cast<int>(type)][op_index(op)]; user != MPI_OP_NULL)
    return user;
  static const MPI_Op builtin[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
  return builtin[op_index(op)];
}

void MpiCollectives::start(Job& job, MPI_Request (&reqs)[2], std::size_t off, std::size_t len,
                           int step, const CallName& what) {
  const CollCall& c = job.call;
  const std::size_t es = job.elem;
  const char* s = job.send + off * es;
  char* r = job.recv + off * es;
  const void* sb = job.in_place ? MPI_IN_PLACE : static_cast<const void*>(s);
  const int n = static_cast<int>(len);
  MPI_Comm w = MPI_COMM_WORLD;
  switch (c.coll) {
    case Coll::all_reduce:
      return check_mpi(MPI_Iallreduce(sb, r, n, job.type, job.op, w, &reqs[0]), what);
    case Coll::reduce:
      if (rank_ != c.root) sb = s;  // MPI_IN_PLACE is the root's alone
      return check_mpi(MPI_Ireduce(sb, r, n, job.type, job.op, c.root, w, &reqs[0]), what);
    case Coll::broadcast:
      return check_mpi(MPI_Ibcast(r, n, job.type, c.root, w, &reqs[0]), what);
    case Coll::all_gather: {
      Block block(job.type, len, c.count, es);
      return check_mpi(MPI_Iallgather(sb, n, job.type, r, block.count, block.type, w, &reqs[0]), what);
    }
    case Coll::alltoall: {
      Block block(job.type, len, c.count, es);
      return check_mpi(
          MPI_Ialltoall(sb, block.count, block.type, r, block.count, block.type, w, &reqs[0]),
          what);
    }
    case Coll::reduce_scatter:
      if (!job.split)
        return check_mpi(MPI_Ireduce_scatter_block(s, r, n, job.type, job.op, w, &reqs[0]), what);
      // Slice `off` of rank `step`'s block, reduced onto rank `step`.
      s = job.send + (static_cast<std::size_t>(step) * c.count + off) * es;
      return check_mpi(MPI_Ireduce(s, r, n, job.type, job.op, step, w, &reqs[0]), what);
    case Coll::sendrecv: {
      const int to = (rank_ + 1) % size_, from = (rank_ - 1 + size_) % size_;
      return start_pair(reqs, r, s, n, job.type, from, to, kSendRecvTag, what);
    }
  }
}

void MpiCollectives::run(const CollCall& c, Deadline deadline, const AbortCheck& abort_check,
                         std::size_t max_count) {
  if (coll_has_root(c.coll) && (c.root < 0 || c.root >= size_))
    throw UsageError(describe_call(c) + " with root " + std::to_string(c.root) + " in a world of " +
                         std::to_string(size_) + " ranks",
                     "choose a root from 0 to " + std::to_string(size_ - 1));
  if (c.count == 0) return;
  max_count = std::clamp<std::size_t>(max_count, 1, kMaxCount);

  Job job;
  job.call = c;
  job.elem = dtype_size(c.type);
  job.type = mpi_type(c.type);
  job.op = op_for(c.type, c.op);
  job.split = c.count > max_count;
  job.send = static_cast<const char*>(c.send);
  job.recv = static_cast<char*>(c.recv);

  const std::size_t bytes = c.count * job.elem, n = static_cast<std::size_t>(size_);
  const std::size_t r = static_cast<std::size_t>(rank_);
  const char* send = job.send;
  char* recv = job.recv;
  std::size_t send_bytes = bytes, recv_bytes = bytes;
  switch (c.coll) {
    case Coll::all_gather:
      recv_bytes = n * bytes;
      job.in_place = send == recv + r * bytes;
      break;
    case Coll::reduce_scatter:
      send_bytes = n * bytes;
      break;
    case Coll::alltoall:
      send_bytes = recv_bytes = n * bytes;
      job.in_place = send == recv;
      break;
    case Coll::all_reduce:
      job.in_place = send == recv;
      break;
    case Coll::reduce:
      job.in_place = send == recv && rank_ == c.root;
      if (rank_ != c.root) recv_bytes = 0;  // MPI leaves recv alone there
      break;
    case Coll::broadcast:
      // MPI broadcasts one buffer: the root's data goes to recv first.
      if (rank_ == c.root && send != recv) std::memmove(recv, send, bytes);
      break;
    case Coll::sendrecv:
      break;
  }
  // Open MPI's non-blocking all-reduce and alltoall run MPI_IN_PLACE 2-3x
  // slower than out of place from 32 MiB (libnbc; measured in
  // docs/BENCHMARKS.md): they take the input from a copy instead, which
  // costs one memcpy of the buffer.
  if (job.in_place && (c.coll == Coll::all_reduce || c.coll == Coll::alltoall)) {
    char* copy = stage(send_bytes);
    std::memcpy(copy, send, send_bytes);
    job.send = copy;
    job.in_place = false;
  } else if (c.coll != Coll::broadcast && !job.in_place &&
             overlap(send, send_bytes, recv, recv_bytes)) {
    // reduce_scatter stages its output (one block), the others their input.
    const bool stage_out = c.coll == Coll::reduce_scatter;
    char* copy = stage(stage_out ? bytes : send_bytes);
    if (stage_out) {
      job.recv = copy;
    } else {
      std::memcpy(copy, send, send_bytes);
      job.send = copy;
    }
  }

  // MPI may still write to the staging memory: it outlives this object.
  auto keep_buffers = [&] {
    in_flight_ = true;
    (void)stage_.release();
    stage_bytes_ = 0;
  };
  const int steps = c.coll == Coll::reduce_scatter && job.split ? size_ : 1;
  const CallName what = [&] {
    return mpi_call_name(c.coll, job.split) + std::string(" for ") + describe_call(c) +
           " on rank " + std::to_string(rank_);
  };
  for (std::size_t off = 0; off < c.count; off += max_count) {
    const std::size_t len = std::min(max_count, c.count - off);
    for (int step = 0; step < steps; ++step) {
      MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
      try {
        start(job, reqs, off, len, step, what);
        if (c.coll == Coll::sendrecv)
          wait_pair(reqs, what, deadline, abort_check);
        else
          wait_request(reqs[0], what, deadline, abort_check);
      } catch (const PendingRequests& p) {
        keep_buffers();
        std::rethrow_exception(p.error);
      } catch (...) {
        // A collective cannot be cancelled: one still pending keeps the buffers.
        if (reqs[0] != MPI_REQUEST_NULL || reqs[1] != MPI_REQUEST_NULL) keep_buffers();
        throw;
      }
    }
  }

  if (job.recv != recv) std::memcpy(recv, job.recv, bytes);
  const bool holds_result = c.coll != Coll::reduce || rank_ == c.root;
  if (c.op == RedOp::avg && coll_reduces(c.coll) && holds_result)
    finish_avg(recv, c.count, c.type, size_);
}

}  // namespace gpudiag
