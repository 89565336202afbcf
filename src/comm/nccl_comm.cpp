// NCCL backend (see nccl.h). Every wait is a poll loop: ncclCommGetAsyncError
// for the communicator's state, cudaStreamQuery for queued work, the deadline,
// and the caller's abort_check. Any way out but success aborts the
// communicator so no NCCL thread is left spinning.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <thread>

#include "comm/nccl.h"
#include "gpu/cuda.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag {

namespace {

std::string nccl_error(ncclResult_t r, ncclComm_t comm) {
  std::string s = std::string(ncclGetErrorString(r));
  const char* last = ncclGetLastError(comm);
  if (last && *last) s += ": " + std::string(last);
  return s;
}

std::string remedy_for(ncclResult_t r) {
  switch (r) {
    case ncclSystemError:
    case ncclRemoteError:
      return "run again with --nccl-debug info; check NCCL_SOCKET_IFNAME and firewalls between "
             "hosts";
    case ncclUnhandledCudaError:
      return "check the GPU with nvidia-smi and dmesg (Xid errors)";
    case ncclInvalidUsage:
      return "two ranks on one GPU, or mismatched world sizes";
    default:
      return "run again with --nccl-debug info to see NCCL's own explanation";
  }
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm) : comm_(comm) {}
  ~NcclCommunicator() override {
    // A healthy communicator is finalized and destroyed; one that failed is
    // aborted, which never blocks on peers.
    if (!healthy_) {
      ncclCommAbort(comm_);
      return;
    }
    ncclResult_t st = ncclCommFinalize(comm_);
    auto deadline = Deadline::after(std::chrono::seconds(10));
    while (st == ncclSuccess || st == ncclInProgress) {
      if (ncclCommGetAsyncError(comm_, &st) != ncclSuccess || st != ncclInProgress) break;
      if (deadline.expired()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (st == ncclSuccess)
      ncclCommDestroy(comm_);
    else
      ncclCommAbort(comm_);
  }

  std::string name() const override { return "nccl"; }

  void all_reduce_sum(float* data, std::size_t count, Deadline deadline) override {
    ncclResult_t r = ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm_,
                                   static_cast<cudaStream_t>(stream_.handle()));
    if (r != ncclSuccess && r != ncclInProgress) fail("ncclAllReduce", r);
    wait("ncclAllReduce of " + human_bytes(count * sizeof(float)), deadline);
  }

  void all_gather(float* data, std::size_t count, Deadline deadline) override {
    int rank = 0;
    ncclCommUserRank(comm_, &rank);
    ncclResult_t r = ncclAllGather(data + rank * count, data, count, ncclFloat, comm_,
                                   static_cast<cudaStream_t>(stream_.handle()));
    if (r != ncclSuccess && r != ncclInProgress) fail("ncclAllGather", r);
    wait("ncclAllGather of " + human_bytes(count * sizeof(float)) + " per rank", deadline);
  }

  void broadcast(float* data, std::size_t count, int root, Deadline deadline) override {
    ncclResult_t r = ncclBroadcast(data, data, count, ncclFloat, root, comm_,
                                   static_cast<cudaStream_t>(stream_.handle()));
    if (r != ncclSuccess && r != ncclInProgress) fail("ncclBroadcast", r);
    wait("ncclBroadcast of " + human_bytes(count * sizeof(float)), deadline);
  }

  void send_recv(int peer, const float* out, float* in, std::size_t count,
                 Deadline deadline) override {
    auto stream = static_cast<cudaStream_t>(stream_.handle());
    ncclResult_t r = ncclGroupStart();
    if (r == ncclSuccess) r = ncclSend(out, count, ncclFloat, peer, comm_, stream);
    if (r == ncclSuccess) r = ncclRecv(in, count, ncclFloat, peer, comm_, stream);
    ncclResult_t end = ncclGroupEnd();
    if (r == ncclSuccess) r = end;
    if (r != ncclSuccess && r != ncclInProgress)
      fail("ncclSend/ncclRecv with rank " + std::to_string(peer), r);
    wait("ncclSend/ncclRecv of " + human_bytes(count * sizeof(float)) + " with rank " +
             std::to_string(peer),
         deadline);
  }

  void barrier(Deadline deadline) override {
    // What torch.distributed.barrier() does on NCCL: a one-element all-reduce.
    if (!one_) one_ = std::make_unique<DeviceBuffer>(sizeof(float));
    float v = 1.0f;
    copy_to_device(one_->get(), &v, sizeof v);
    all_reduce_sum(static_cast<float*>(one_->get()), 1, deadline);
  }

 private:
  [[noreturn]] void fail(const std::string& call, ncclResult_t r) {
    healthy_ = false;
    throw Error(ExitCode::broken, call + " failed: " + nccl_error(r, comm_), remedy_for(r));
  }

  /// Polls until the enqueue finished and the stream drained.
  void wait(const std::string& what, Deadline deadline) {
    while (true) {
      ncclResult_t st = ncclSuccess;
      ncclCommGetAsyncError(comm_, &st);
      if (st != ncclSuccess && st != ncclInProgress) fail(what, st);
      if (st == ncclSuccess && stream_.done()) return;
      if (abort_check_) {
        if (auto why = abort_check_()) {
          healthy_ = false;
          throw Error(ExitCode::broken, what + " abandoned: " + *why);
        }
      }
      if (deadline.expired()) {
        healthy_ = false;
        throw TimeoutError(what + " did not complete in time (communicator aborted)",
                           "a peer is stuck or gone; see the other ranks' lines, or run with "
                           "--nccl-debug info");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  ncclComm_t comm_;
  Stream stream_;
  std::unique_ptr<DeviceBuffer> one_;
  bool healthy_ = true;
};

ncclUniqueId parse_id(const std::string& hex) {
  ncclUniqueId id{};
  if (hex.size() != 2 * sizeof id.internal)
    throw Error(ExitCode::internal,
                "malformed NCCL unique id of " + std::to_string(hex.size()) + " hex digits");
  for (std::size_t i = 0; i < sizeof id.internal; ++i)
    id.internal[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return id;
}

}  // namespace

NcclVersions nccl_versions() {
  NcclVersions v;
  v.built_with_nccl = true;
  v.compiled = NCCL_VERSION_CODE;
  ncclGetVersion(&v.loaded);
  return v;
}

std::string nccl_make_unique_id() {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess)
    throw Error(ExitCode::broken, std::string("ncclGetUniqueId failed: ") + ncclGetErrorString(r),
                "NCCL could not find a network interface for bootstrap; set NCCL_SOCKET_IFNAME");
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (char c : id.internal) {
    auto b = static_cast<unsigned char>(c);
    hex += digits[b >> 4];
    hex += digits[b & 15];
  }
  return hex;
}

std::unique_ptr<Communicator> make_nccl_communicator(const std::string& unique_id_hex, int rank,
                                                     int size, Deadline deadline,
                                                     const AbortCheck& abort_check) {
  ncclUniqueId id = parse_id(unique_id_hex);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  auto abort_with = [&](const std::string& msg, ExitCode code, const std::string& remedy) {
    if (comm) ncclCommAbort(comm);
    throw Error(code, msg, remedy);
  };
  if (r != ncclSuccess && r != ncclInProgress)
    abort_with("ncclCommInitRankConfig failed: " + nccl_error(r, comm), ExitCode::broken,
               remedy_for(r));
  while (true) {
    ncclResult_t st = ncclInProgress;
    ncclCommGetAsyncError(comm, &st);
    if (st == ncclSuccess) break;
    if (st != ncclInProgress)
      abort_with("NCCL communicator init failed: " + nccl_error(st, comm), ExitCode::broken,
                 remedy_for(st));
    if (abort_check)
      if (auto why = abort_check())
        abort_with("NCCL communicator init abandoned: " + *why, ExitCode::broken, "");
    if (deadline.expired())
      abort_with("NCCL communicator init did not complete in time (aborted)", ExitCode::timeout,
                 "NCCL bootstrap could not reach all peers: check NCCL_SOCKET_IFNAME and "
                 "firewalls, and run with --nccl-debug info");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  auto c = std::make_unique<NcclCommunicator>(comm);
  c->set_abort_check(abort_check);
  return c;
}

}  // namespace gpudiag
