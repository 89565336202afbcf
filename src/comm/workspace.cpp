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
  void upload(float* dst, const float* src, std::size_t count) override {
    std::memcpy(dst, src, count * sizeof(float));
  }
  void download(float* dst, const float* src, std::size_t count) override {
    std::memcpy(dst, src, count * sizeof(float));
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

std::unique_ptr<Communicator> make_self_communicator(std::string name) {
  return std::make_unique<SelfCommunicator>(std::move(name));
}

std::unique_ptr<Workspace> make_host_workspace() { return std::make_unique<HostWorkspace>(); }

}  // namespace gpudiag
