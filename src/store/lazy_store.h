// A store connected on first use: a node leader's line to the root's store
// (tree/relay.h), needed only when its group's judge is lost, so the
// root's store serves the groups' judges and not every node's leader.
#pragma once

#include <functional>
#include <memory>
#include <mutex>

#include "store/store.h"

namespace gpudiag {

class LazyStore : public Store {
 public:
  LazyStore(std::function<std::unique_ptr<Store>()> connect, std::string address)
      : connect_(std::move(connect)), address_(std::move(address)) {}
  void set(const std::string& k, const std::string& v, Deadline d) override { s().set(k, v, d); }
  std::string get(const std::string& k, Deadline d) override { return s().get(k, d); }
  std::optional<std::string> try_get(const std::string& k, Deadline d) override {
    return s().try_get(k, d);
  }
  std::int64_t add(const std::string& k, std::int64_t v, Deadline d) override {
    return s().add(k, v, d);
  }
  bool wait(const std::vector<std::string>& k, Deadline d) override { return s().wait(k, d); }
  std::vector<std::optional<std::string>> multi_get(const std::vector<std::string>& k,
                                                    Deadline d) override {
    return s().multi_get(k, d);
  }
  std::string address() const override { return address_; }
  std::optional<bool> server_running() override { return s().server_running(); }

 private:
  Store& s() {
    std::lock_guard lock(mu_);
    if (!store_) store_ = connect_();
    return *store_;
  }
  std::function<std::unique_ptr<Store>()> connect_;
  std::string address_;
  std::mutex mu_;
  std::unique_ptr<Store> store_;
};

}  // namespace gpudiag
