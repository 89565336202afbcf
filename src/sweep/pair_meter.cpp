// A sweep pair's measurement (pair_meter.h) and the host/tcp meter. The
// measurement follows the link test's (link_run.cpp): checked first
// exchange, an agreed count that fits the deadline, the median of the timed
// ones. Buffers the transport may still touch after a failure (an NCCL
// launch that cannot be taken back) are kept, never freed under it.
#include "sweep/pair_meter.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "checks/verify.h"
#include "comm/collective.h"
#include "comm/tcp_ring.h"
#include "util/error.h"

namespace gpudiag::sweep {

namespace {

class TcpPairMeter : public PairMeter {
 public:
  TcpPairMeter(const std::string& host, std::string token)
      : token_(std::move(token)), workspace_(make_host_workspace()) {
    endpoint_ = net::host_port(host, listener_.port());
  }
  std::string name() const override { return "host/tcp"; }
  std::string endpoint() const override { return endpoint_; }
  std::string make_pair_id() override { return {}; }
  std::unique_ptr<Communicator> connect(const PairPeer& me, const PairPeer& other, int round,
                                        Deadline deadline) override {
    // Connections left from an earlier round (a partner that gave up late)
    // are not this pair's.
    listener_.early().clear();
    RingPeers p;
    const bool lower = me.rank < other.rank;
    p.rank = lower ? 0 : 1;
    p.endpoints = lower ? std::vector{me.endpoint, other.endpoint}
                        : std::vector{other.endpoint, me.endpoint};
    p.labels = lower ? std::vector{me.label, other.label} : std::vector{other.label, me.label};
    p.token = token_ + ":sweep:" + std::to_string(round);
    return make_tcp_ring(listener_, p, deadline);
  }
  Workspace& workspace() override { return *workspace_; }

 private:
  RingListener listener_;
  std::string token_, endpoint_;
  std::unique_ptr<Workspace> workspace_;
};

/// Buffers of one measurement, released unless the transport may still use them.
struct Buffers {
  Workspace& ws;
  std::vector<float*> blocks;
  bool keep = false;
  float* get(std::size_t count) {
    blocks.push_back(ws.allocate(count));
    return blocks.back();
  }
  ~Buffers() {
    if (!keep)
      for (float* b : blocks) ws.release(b);
  }
};

}  // namespace

std::unique_ptr<PairMeter> make_tcp_pair_meter(const std::string& advertise_host,
                                               const std::string& token) {
  return std::make_unique<TcpPairMeter>(advertise_host, token);
}

PairOutcome measure_pair(PairMeter& meter, const PairPeer& me, const PairPeer& other, int round,
                         const PairSpec& spec) {
  PairOutcome out;
  const auto deadline = Deadline::after_seconds(spec.timeout_s);
  const std::size_t count = std::max<std::size_t>(1, spec.bytes / sizeof(float));
  Workspace& ws = meter.workspace();
  Buffers buf{ws, {}};
  std::unique_ptr<Communicator> comm;
  try {
    comm = meter.connect(me, other, round, deadline);
    std::vector<float> host(count);
    fill_contribution(host.data(), count, me.rank);
    float* send = buf.get(count);
    float* recv = buf.get(count);
    float* flag_out = buf.get(1);
    float* flag_in = buf.get(1);
    ws.upload(send, host.data(), count);
    CollCall call;
    call.coll = Coll::sendrecv;
    call.send = send;
    call.recv = recv;
    call.count = count;
    const auto t0 = Deadline::Clock::now();
    comm->run(call, deadline);
    const double first = seconds_since(t0);
    ws.download(host.data(), recv, count);
    for (std::size_t i = 0; i < count; ++i)
      if (host[i] != contribution(other.rank, i))
        throw Error(ExitCode::broken, "data from " + other.label + " arrived wrong at element " +
                                          std::to_string(i));
    // The count of timed exchanges: what fits in a quarter of the deadline,
    // chosen by the lower rank; both ends must run the same number.
    const auto fit = static_cast<float>(std::clamp(
        std::floor(spec.timeout_s / 4 / std::max(first, 1e-9)), 1.0, double(std::max(1, spec.iters))));
    ws.upload(flag_out, &fit, 1);
    CollCall flag = call;
    flag.send = flag_out;
    flag.recv = flag_in;
    flag.count = 1;
    comm->run(flag, deadline);
    float theirs = 0;
    ws.download(&theirs, flag_in, 1);
    const float agreed = me.rank < other.rank ? fit : theirs;
    if (!(agreed >= 1 && agreed <= std::max(1, spec.iters) && agreed == std::floor(agreed)))
      throw Error(ExitCode::broken, "the exchange count from " + other.label + " arrived as " +
                                        std::to_string(agreed));
    // The fastest exchange: a slow NIC or cable is slow every time, while a
    // busy CPU or a neighbour's burst only slows some; a pool sweep must not
    // exclude a node for the noise of one moment.
    auto times = comm->run_timed(call, static_cast<int>(agreed), true, deadline);
    const double t = *std::min_element(times.begin(), times.end());
    out.ok = t > 0;
    out.gbps = t > 0 ? static_cast<double>(count * sizeof(float)) / t / 1e9 : 0;
    if (!out.ok) out.why = "the exchange with " + other.label + " took no measurable time";
  } catch (const std::exception& e) {
    out.ok = false;
    const auto* err = dynamic_cast<const Error*>(&e);
    out.why = err ? err->one_line() : e.what();
    buf.keep = comm && comm->buffers_in_flight();
  }
  return out;
}

}  // namespace gpudiag::sweep
