// A Store in this process's memory: what the scale simulator gives the ranks
// of one simulated node, which share a process with their leader (the tree's
// upper levels use real TCP stores), and what unit tests of the tree use.
// Same contract as a TCP store (store.h): waits end at their deadline.
#pragma once

#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "store/store.h"

namespace gpudiag {

class MemoryStore : public Store {
 public:
  explicit MemoryStore(std::string name = "memory") : name_(std::move(name)) {}
  void set(const std::string& key, const std::string& value, Deadline deadline) override;
  std::string get(const std::string& key, Deadline deadline) override;
  std::optional<std::string> try_get(const std::string& key, Deadline deadline) override;
  std::int64_t add(const std::string& key, std::int64_t delta, Deadline deadline) override;
  bool wait(const std::vector<std::string>& keys, Deadline deadline) override;
  std::vector<std::optional<std::string>> multi_get(const std::vector<std::string>& keys,
                                                    Deadline deadline) override;
  std::string address() const override { return name_; }
  /// Bytes of keys and values held.
  std::size_t bytes() const;
  /// Forgets every key that starts with `prefix`; returns how many (the
  /// simulator's nodes, once their ranks are past a checkpoint).
  std::size_t drop_prefix(const std::string& prefix);

 private:
  std::string name_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::unordered_map<std::string, std::string> values_;
  std::size_t bytes_ = 0;
};

/// Another store, not owned: what a rank's plane (which owns its Store) is
/// given over a node's shared MemoryStore.
class StoreView : public Store {
 public:
  explicit StoreView(Store& s) : s_(s) {}
  void set(const std::string& k, const std::string& v, Deadline d) override { s_.set(k, v, d); }
  std::string get(const std::string& k, Deadline d) override { return s_.get(k, d); }
  std::optional<std::string> try_get(const std::string& k, Deadline d) override {
    return s_.try_get(k, d);
  }
  std::int64_t add(const std::string& k, std::int64_t v, Deadline d) override {
    return s_.add(k, v, d);
  }
  bool wait(const std::vector<std::string>& k, Deadline d) override { return s_.wait(k, d); }
  std::vector<std::optional<std::string>> multi_get(const std::vector<std::string>& k,
                                                    Deadline d) override {
    return s_.multi_get(k, d);
  }
  std::string address() const override { return s_.address(); }
  std::optional<bool> server_running() override { return s_.server_running(); }

 private:
  Store& s_;
};

}  // namespace gpudiag
