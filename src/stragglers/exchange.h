// Several nodes under --stragglers: the launchers share their nodes'
// arrivals through the job's store (the rendezvous they met in), so every
// launcher judges the whole job and names a straggler of any node, by node
// and rank, while the job runs.
//
// A thread of its own, every `interval_s`: it sets this node's value
// (share.h) under `stragglers/<round>/<node>`, reads the other nodes' in one
// MULTI_GET and hands them to the watch. A store call that fails or times
// out (2 s) costs that pass only; the job never waits for it. finish() stops
// the thread, publishes the node's last records marked final, and reads the
// others until each said final too or `final_wait_s` passed, so every
// launcher's end summary holds the same collectives.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "store/store.h"
#include "stragglers/watch.h"

namespace gpudiag::stragglers {

struct ExchangeSettings {
  int round = 0;  ///< the rendezvous round (the attempt), the same on every node
  int node = 0;
  int nnodes = 1;
  double interval_s = 0.25;
  double final_wait_s = 3;
};

/// The key of `node`'s value in `round`.
std::string share_key(int round, int node);

class Exchange {
 public:
  /// Starts the thread; `store` and `watch` outlive this object.
  Exchange(Store& store, Watch& watch, ExchangeSettings settings);
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  /// Stops the watch's reading, shares its last records and reads the other
  /// nodes' last ones (see above). Once; the destructor does it if not done.
  void finish();

 private:
  void run();
  /// Publishes and reads once; true when every other node said it ended.
  bool pass(bool final);

  Store& store_;
  Watch& watch_;
  ExchangeSettings s_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false, finished_ = false;
  bool warned_ = false;
  std::string last_set_;  ///< the value set last (the thread's, then finish()'s)
  std::thread thread_;
};

}  // namespace gpudiag::stragglers
