#include "checks/host_transport.h"

#include "checks/verdict.h"
#include "comm/mpi.h"
#include "comm/tcp_ring.h"
#include "util/error.h"

namespace gpudiag {

namespace {

class MpiTransport : public HostTransport {
 public:
  explicit MpiTransport(MpiSession& s) : session_(s) {}
  std::string name() const override { return "host/mpi"; }
  std::string prepare() override { return {}; }
  std::unique_ptr<Communicator> connect(const std::vector<RankRecord>&, int, Deadline,
                                        const AbortCheck&) override {
    return make_mpi_host_communicator(session_);
  }

 private:
  MpiSession& session_;
};

class SelfTransport : public HostTransport {
 public:
  std::string name() const override { return "host/self"; }
  std::string prepare() override { return {}; }
  std::unique_ptr<Communicator> connect(const std::vector<RankRecord>&, int, Deadline,
                                        const AbortCheck&) override {
    return make_self_communicator("host/self");
  }
};

class TcpTransport : public HostTransport {
 public:
  TcpTransport(std::string host, std::string token)
      : host_(std::move(host)), token_(std::move(token)) {}
  std::string name() const override { return "host/tcp"; }
  std::string prepare() override {
    listener_ = std::make_unique<RingListener>();
    return net::host_port(host_, listener_->port());
  }
  std::unique_ptr<Communicator> connect(const std::vector<RankRecord>& peers, int rank,
                                        Deadline deadline, const AbortCheck& abort_check) override {
    RingPeers p;
    p.rank = rank;
    p.token = token_;
    for (const auto& r : peers) {
      if (r.endpoint.empty())
        throw Error(ExitCode::broken, rank_label(r) + " published no ring endpoint");
      p.endpoints.push_back(r.endpoint);
      p.labels.push_back(rank_label(r));
    }
    return make_tcp_ring(*listener_, p, deadline, abort_check);
  }

 private:
  std::string host_, token_;
  std::unique_ptr<RingListener> listener_;
};

}  // namespace

std::unique_ptr<HostTransport> make_tcp_transport(std::string advertise_host, std::string token) {
  return std::make_unique<TcpTransport>(std::move(advertise_host), std::move(token));
}

std::unique_ptr<HostTransport> make_self_transport() { return std::make_unique<SelfTransport>(); }

std::unique_ptr<HostTransport> make_mpi_transport(MpiSession& session) {
  return std::make_unique<MpiTransport>(session);
}

}  // namespace gpudiag
