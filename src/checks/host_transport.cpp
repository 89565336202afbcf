#include "checks/host_transport.h"

#include "comm/mpi.h"

namespace gpudiag {

namespace {

class MpiTransport : public HostTransport {
 public:
  explicit MpiTransport(MpiSession& s) : session_(s) {}
  std::string name() const override { return "host/mpi"; }
  std::string prepare() override { return {}; }
  std::unique_ptr<Communicator> connect(const std::vector<RankRecord>&, int, Deadline) override {
    return make_mpi_host_communicator(session_);
  }

 private:
  MpiSession& session_;
};

/// World size 1: every collective is the identity.
class SelfCommunicator : public Communicator {
 public:
  std::string name() const override { return "host/self"; }
  void all_reduce_sum(float*, std::size_t, Deadline) override {}
  void barrier(Deadline) override {}
};

class SelfTransport : public HostTransport {
 public:
  std::string name() const override { return "host/self"; }
  std::string prepare() override { return {}; }
  std::unique_ptr<Communicator> connect(const std::vector<RankRecord>&, int, Deadline) override {
    return std::make_unique<SelfCommunicator>();
  }
};

}  // namespace

std::unique_ptr<HostTransport> make_self_transport() { return std::make_unique<SelfTransport>(); }

std::unique_ptr<HostTransport> make_mpi_transport(MpiSession& session) {
  return std::make_unique<MpiTransport>(session);
}

}  // namespace gpudiag
