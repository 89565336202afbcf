// The reference for gpudiag bench's NCCL timing (bench/nccl_event_timing.py):
// one rank on one GPU, one NCCL collective timed the way nccl-tests times it,
// with nothing of gpudiag in the path. Per size: warm-up calls, a
// synchronize, a CUDA event, ITERS calls queued back to back on one stream,
// a second event, a synchronize; the time per call is the events' elapsed
// time / ITERS. gpudiag records an event after every call instead and waits
// once; both should give the same mean.
//
// NCCL is opened with dlopen (GPUDIAG_NCCL_LIB, else libnccl.so.2), as
// gpudiag opens it, so the program runs wherever gpudiag's NCCL steps run.
// The few NCCL declarations below are its stable C ABI (nccl.h).
//
// Usage: nccl_event_timing OP MIN MAX ITERS WARMUP    OP: all_reduce | all_gather |
//        reduce_scatter | broadcast | reduce | alltoall | sendrecv
// Prints "bytes seconds_per_call" per size, sizes doubling from MIN to MAX.
// Exit 2 with a line when no GPU or no NCCL is usable.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct UniqueId {
  char internal[128];
};
using Comm = void*;
constexpr int kFloat = 7, kSum = 0;  // ncclFloat32, ncclSum

struct Nccl {
  int (*get_unique_id)(UniqueId*);
  int (*comm_init_rank)(Comm*, int, UniqueId, int);
  int (*comm_destroy)(Comm);
  const char* (*error_string)(int);
  int (*all_reduce)(const void*, void*, size_t, int, int, Comm, cudaStream_t);
  int (*all_gather)(const void*, void*, size_t, int, Comm, cudaStream_t);
  int (*reduce_scatter)(const void*, void*, size_t, int, int, Comm, cudaStream_t);
  int (*broadcast)(const void*, void*, size_t, int, int, Comm, cudaStream_t);
  int (*reduce)(const void*, void*, size_t, int, int, int, Comm, cudaStream_t);
  int (*send)(const void*, size_t, int, int, Comm, cudaStream_t);
  int (*recv)(void*, size_t, int, int, Comm, cudaStream_t);
  int (*group_start)();
  int (*group_end)();
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "nccl_event_timing: %s\n", what.c_str());
  std::exit(2);
}

template <class F>
void bind(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) die(std::string("the NCCL library lacks ") + name);
}

Nccl open_nccl() {
  const char* path = std::getenv("GPUDIAG_NCCL_LIB");
  void* lib = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib) die(std::string("cannot open NCCL: ") + dlerror());
  Nccl n{};
  bind(lib, n.get_unique_id, "ncclGetUniqueId");
  bind(lib, n.comm_init_rank, "ncclCommInitRank");
  bind(lib, n.comm_destroy, "ncclCommDestroy");
  bind(lib, n.error_string, "ncclGetErrorString");
  bind(lib, n.all_reduce, "ncclAllReduce");
  bind(lib, n.all_gather, "ncclAllGather");
  bind(lib, n.reduce_scatter, "ncclReduceScatter");
  bind(lib, n.broadcast, "ncclBroadcast");
  bind(lib, n.reduce, "ncclReduce");
  bind(lib, n.send, "ncclSend");
  bind(lib, n.recv, "ncclRecv");
  bind(lib, n.group_start, "ncclGroupStart");
  bind(lib, n.group_end, "ncclGroupEnd");
  return n;
}

void cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) die("usage: nccl_event_timing OP MIN MAX ITERS WARMUP");
  const std::string op = argv[1];
  const size_t min = std::strtoull(argv[2], nullptr, 10), max = std::strtoull(argv[3], nullptr, 10);
  const int iters = std::atoi(argv[4]), warmup = std::atoi(argv[5]);
  if (min < 4 || max < min || max > (size_t{8} << 30) || iters < 1 || warmup < 0)
    die("MIN 4..MAX, MAX up to 8 GiB, ITERS >= 1, WARMUP >= 0");
  Nccl n = open_nccl();
  cuda(cudaSetDevice(0), "cudaSetDevice");
  auto check = [&](int r, const char* what) {
    if (r != 0) die(std::string(what) + ": " + n.error_string(r));
  };
  UniqueId id;
  check(n.get_unique_id(&id), "ncclGetUniqueId");
  Comm comm = nullptr;
  check(n.comm_init_rank(&comm, 1, id, 0), "ncclCommInitRank");
  cudaStream_t stream;
  cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  void *send = nullptr, *recv = nullptr;
  cuda(cudaMalloc(&send, max), "cudaMalloc");
  cuda(cudaMalloc(&recv, max), "cudaMalloc");
  cuda(cudaMemset(send, 0, max), "cudaMemset");
  cudaEvent_t start, stop;
  cuda(cudaEventCreate(&start), "cudaEventCreate");
  cuda(cudaEventCreate(&stop), "cudaEventCreate");
  // One rank: nccl-tests' counts for n = 1 are all bytes / 4 floats.
  auto call = [&](size_t count) {
    if (op == "all_reduce")
      return check(n.all_reduce(send, recv, count, kFloat, kSum, comm, stream), op.c_str());
    if (op == "all_gather")
      return check(n.all_gather(send, recv, count, kFloat, comm, stream), op.c_str());
    if (op == "reduce_scatter")
      return check(n.reduce_scatter(send, recv, count, kFloat, kSum, comm, stream), op.c_str());
    if (op == "broadcast")
      return check(n.broadcast(send, recv, count, kFloat, 0, comm, stream), op.c_str());
    if (op == "reduce")
      return check(n.reduce(send, recv, count, kFloat, kSum, 0, comm, stream), op.c_str());
    if (op == "alltoall" || op == "sendrecv") {
      check(n.group_start(), "ncclGroupStart");
      check(n.send(send, count, kFloat, 0, comm, stream), "ncclSend");
      check(n.recv(recv, count, kFloat, 0, comm, stream), "ncclRecv");
      return check(n.group_end(), "ncclGroupEnd");
    }
    die("unknown OP " + op);
  };
  for (size_t bytes = min; bytes <= max; bytes *= 2) {
    const size_t count = bytes / sizeof(float);
    for (int i = 0; i < warmup; ++i) call(count);
    cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    cuda(cudaEventRecord(start, stream), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) call(count);
    cuda(cudaEventRecord(stop, stream), "cudaEventRecord");
    cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    float ms = 0;
    cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    std::printf("%zu %.9f\n", count * sizeof(float), ms / 1e3 / iters);
  }
  n.comm_destroy(comm);
  return 0;
}
