// For the host/tcp tests: a ring of `n` members as threads of this process,
// over loopback, each running `body(communicator, rank)`.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "comm/tcp_ring.h"

namespace gpudiag::testing_ring {

template <class F>
void on_ring(int n, F body) {
  std::vector<std::unique_ptr<RingListener>> listeners;
  RingPeers base;
  base.token = "t";
  for (int r = 0; r < n; ++r) {
    listeners.push_back(std::make_unique<RingListener>());
    base.endpoints.push_back("127.0.0.1:" + std::to_string(listeners.back()->port()));
    base.labels.push_back("rank " + std::to_string(r));
  }
  std::vector<std::future<void>> done;
  for (int r = 0; r < n; ++r)
    done.push_back(std::async(std::launch::async, [&, r] {
      RingPeers p = base;
      p.rank = r;
      auto ring = make_tcp_ring(*listeners[r], p, Deadline::after(std::chrono::seconds(60)));
      body(*ring, r);
    }));
  for (auto& f : done) f.get();
}

}  // namespace gpudiag::testing_ring
