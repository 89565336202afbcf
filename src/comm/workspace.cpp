// The host Workspace, and the communicator of a world of one rank. (The
// device workspace is in device_workspace.cpp: its copies share NCCL's stream.)
#include <cstring>

#include "comm/communicator.h"
#include "util/error.h"

namespace gpudiag {

namespace {

class HostWorkspace : public Workspace {
 public:
  float* allocate(std::size_t count) override {
    blocks_.push_back(std::make_unique<float[]>(count));
    return blocks_.back().get();
  }
  void release(float* block) override {
    std::erase_if(blocks_, [&](const auto& b) { return b.get() == block; });
  }
  void upload_bytes(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void download_bytes(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }

 private:
  std::vector<std::unique_ptr<float[]>> blocks_;
};

class SelfCommunicator : public Communicator {
 public:
  explicit SelfCommunicator(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  void all_reduce_sum(float*, std::size_t, Deadline) override {}
  void all_gather(float*, std::size_t, Deadline) override {}
  void broadcast(float*, std::size_t, int, Deadline) override {}
  void barrier(Deadline) override {}
  void send_recv(int peer, const float*, float*, std::size_t, Deadline) override {
    throw Error(ExitCode::internal, "send_recv to rank " + std::to_string(peer) +
                                        " in a world of one rank");
  }
  /// With one rank every collective copies send to recv (sendrecv: to
  /// itself); avg over one rank is the value itself.
  void run(const CollCall& c, Deadline) override {
    const std::size_t bytes = c.count * dtype_size(c.type);
    if (c.recv != c.send) std::memmove(c.recv, c.send, bytes);
  }

 private:
  std::string name_;
};

}  // namespace

double Communicator::all_reduce_timed(float* data, std::size_t count, int iters,
                                      Deadline deadline) {
  const auto t0 = Deadline::Clock::now();
  for (int i = 0; i < iters; ++i) all_reduce_sum(data, count, deadline);
  return seconds_since(t0);
}

double Communicator::send_recv_timed(int peer, const float* out, float* in, std::size_t count,
                                     int iters, Deadline deadline) {
  const auto t0 = Deadline::Clock::now();
  for (int i = 0; i < iters; ++i) send_recv(peer, out, in, count, deadline);
  return seconds_since(t0);
}

void Communicator::run(const CollCall& call, Deadline) {
  throw Error(ExitCode::usage, describe_call(call) + " is not available on the " + name() +
                                   " backend",
              "choose another --backend");
}

std::vector<double> Communicator::run_timed(const CollCall& call, int iters, bool,
                                            Deadline deadline, bool) {
  std::vector<double> out;
  out.reserve(iters);
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Deadline::Clock::now();
    run(call, deadline);
    out.push_back(seconds_since(t0));
  }
  return out;
}

std::unique_ptr<Communicator> make_self_communicator(std::string name) {
  return std::make_unique<SelfCommunicator>(std::move(name));
}

std::unique_ptr<Workspace> make_host_workspace() { return std::make_unique<HostWorkspace>(); }

}  // namespace gpudiag
