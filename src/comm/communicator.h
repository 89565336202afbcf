// Where bytes move: the collectives the check runs, behind one interface.
//
// Backends:
//   nccl      device memory, NCCL (nccl_comm.cpp)
//   host/mpi  host memory, MPI non-blocking collectives (mpi_session.cpp, mpi_collectives.cpp)
//   host/tcp  host memory, ring over TCP sockets (tcp_ring.cpp, tcp_collectives.cpp)
// Every call takes a Deadline; on expiry the backend aborts what it can and
// throws TimeoutError. `abort_check`, when set, is polled while waiting and
// may return a reason (a peer reported dead) to give up early.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/collective.h"
#include "util/deadline.h"

namespace gpudiag {

using AbortCheck = std::function<std::optional<std::string>()>;

/// Memory where a communicator's buffers live (device or host).
class Workspace {
 public:
  virtual ~Workspace() = default;
  /// `count` floats, owned by the workspace until it is destroyed.
  virtual float* allocate(std::size_t count) = 0;
  /// Frees a block from allocate() before the workspace goes away.
  virtual void release(float* block) = 0;
  /// Copies `bytes` bytes between host memory and workspace memory.
  virtual void upload_bytes(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void download_bytes(void* dst, const void* src, std::size_t bytes) = 0;
  /// `bytes` bytes (rounded up to whole floats), owned like allocate()'s.
  void* allocate_bytes(std::size_t bytes) { return allocate((bytes + 3) / 4); }
  void upload(float* dst, const float* src, std::size_t count) {
    upload_bytes(dst, src, count * sizeof(float));
  }
  void download(float* dst, const float* src, std::size_t count) {
    download_bytes(dst, src, count * sizeof(float));
  }
};

/// Host memory (std::unique_ptr arrays).
std::unique_ptr<Workspace> make_host_workspace();

class Communicator;

/// A world of one rank, where every collective leaves the data as it is.
std::unique_ptr<Communicator> make_self_communicator(std::string name);

class Communicator {
 public:
  virtual ~Communicator() = default;
  /// "nccl", "host/mpi", "host/tcp".
  virtual std::string name() const = 0;
  /// In-place sum over all ranks of `count` floats at `data` (workspace memory).
  virtual void all_reduce_sum(float* data, std::size_t count, Deadline deadline) = 0;
  /// In place: rank r's `count` floats sit at data + r * count; afterwards
  /// every rank holds all size * count.
  virtual void all_gather(float* data, std::size_t count, Deadline deadline) = 0;
  /// `count` floats at `data` on `root` to every rank.
  virtual void broadcast(float* data, std::size_t count, int root, Deadline deadline) = 0;
  virtual void barrier(Deadline deadline) = 0;
  /// `iters` all-reduces of `count` floats at `data`; returns the seconds
  /// they took in all. Backends that can queue work (NCCL) queue every
  /// iteration back to back and time them on the device, as nccl-tests does,
  /// so neither the enqueue nor the host's polling is in the figure.
  virtual double all_reduce_timed(float* data, std::size_t count, int iters, Deadline deadline);
  /// The same for `iters` exchanges with `peer` (the link test).
  virtual double send_recv_timed(int peer, const float* out, float* in, std::size_t count,
                                 int iters, Deadline deadline);
  /// One collective of any type and reduction (collective.h), blocking until
  /// this rank's part is done. Backends that cannot run `call` throw an
  /// Error saying so.
  virtual void run(const CollCall& call, Deadline deadline);
  /// `iters` of `call` back to back; the seconds each took. With `blocking`
  /// each waits for completion before the next starts (nccl-tests' -z); a
  /// backend that can queue work (NCCL) otherwise queues them all and times
  /// them on the device between events, as nccl-tests does. `per_call`
  /// (nccl-tests' -I) times each call by events of its own; without it a
  /// backend may time the loop and give each call the mean (NCCL does, as
  /// nccl-tests does: an event per call slows a host-bound loop). Host
  /// backends run and time each.
  virtual std::vector<double> run_timed(const CollCall& call, int iters, bool blocking,
                                        Deadline deadline, bool per_call = true);
  /// Why the last run_timed's figures include launch time ("" when they do
  /// not): NCCL's timing gate expired, or there was none (CUDA_LAUNCH_BLOCKING).
  virtual std::string ungated() const { return {}; }
  /// Opens whatever send_recv needs to reach every peer (all ranks call it).
  virtual void open_links(Deadline) {}
  /// Sends `count` floats at `out` to `peer` while `count` floats from it
  /// arrive at `in`; both ranks call it naming each other (the link test).
  virtual void send_recv(int peer, const float* out, float* in, std::size_t count,
                         Deadline deadline) = 0;
  /// After a call failed, true when the library may still read or write the
  /// buffers it was given (an MPI request it could not cancel): the caller
  /// must then keep them, and must not finalize the library.
  virtual bool buffers_in_flight() const { return false; }
  void set_abort_check(AbortCheck check) { abort_check_ = std::move(check); }

 protected:
  AbortCheck abort_check_;
};

}  // namespace gpudiag
