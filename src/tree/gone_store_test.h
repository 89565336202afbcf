// For the tree's tests: a store that is gone, every call failing as a lost
// connection does ("lost the store at gone:1"), standing for a judge whose
// process ended.
#pragma once

#include "store/store.h"
#include "util/error.h"

namespace gpudiag {

/// A store that is gone: every call fails as a lost connection does.
class GoneStore : public Store {
 public:
  [[noreturn]] static void lost() { throw Error(ExitCode::broken, "lost the store at gone:1"); }
  void set(const std::string&, const std::string&, Deadline) override { lost(); }
  std::string get(const std::string&, Deadline) override { lost(); }
  std::optional<std::string> try_get(const std::string&, Deadline) override { lost(); }
  std::int64_t add(const std::string&, std::int64_t, Deadline) override { lost(); }
  bool wait(const std::vector<std::string>&, Deadline) override { lost(); }
  std::vector<std::optional<std::string>> multi_get(const std::vector<std::string>&,
                                                    Deadline) override {
    lost();
  }
  std::string address() const override { return "gone:1"; }
};

}  // namespace gpudiag
