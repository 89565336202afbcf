// See exchange.h: one pass sets this node's value and reads the others' in
// one round trip; the thread waits `interval_s` between passes on a
// condition variable finish() wakes.
#include "stragglers/exchange.h"

#include <chrono>
#include <spdlog/spdlog.h>
#include <vector>

#include "util/error.h"

namespace gpudiag::stragglers {

namespace {

Deadline store_call() { return Deadline::after(std::chrono::seconds(2)); }

}  // namespace

std::string share_key(int round, int node) {
  return "stragglers/" + std::to_string(round) + "/" + std::to_string(node);
}

Exchange::Exchange(Store& store, Watch& watch, ExchangeSettings settings)
    : store_(store), watch_(watch), s_(settings) {
  thread_ = std::thread([this] { run(); });
}

Exchange::~Exchange() { finish(); }

bool Exchange::pass(bool final) {
  try {
    auto value = watch_.shared(final);
    if (value != last_set_) {  // an unchanged value is not sent again
      store_.set(share_key(s_.round, s_.node), value, store_call());
      last_set_ = std::move(value);
    }
    std::vector<std::string> keys;
    std::vector<int> nodes;
    for (int n = 0; n < s_.nnodes; ++n) {
      if (n == s_.node) continue;
      keys.push_back(share_key(s_.round, n));
      nodes.push_back(n);
    }
    const auto values = store_.multi_get(keys, store_call());
    bool all_final = values.size() == keys.size();
    for (std::size_t i = 0; i < values.size() && i < nodes.size(); ++i) {
      const bool ended = values[i] && watch_.take_shared(nodes[i], *values[i]);
      all_final = all_final && ended;
    }
    return all_final;
  } catch (const std::exception& e) {
    if (!warned_)
      spdlog::info("launch: --stragglers: cannot share arrivals with the other nodes now ({}); "
                   "their ranks are judged when it can",
                   e.what());
    warned_ = true;
    return false;
  }
}

void Exchange::run() {
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s_.interval_s));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    pass(false);
    lock.lock();
    wake_.wait_for(lock, interval, [this] { return stop_; });
  }
}

void Exchange::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    finished_ = stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  watch_.stop();
  // The last records, then the others' until each says it ended: every
  // launcher's summary then holds the same collectives.
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(s_.final_wait_s));
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(std::min(s_.interval_s, 0.1)));
  while (!pass(true) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(interval);
}

}  // namespace gpudiag::stragglers
