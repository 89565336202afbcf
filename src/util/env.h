// A snapshot of environment variables. Code that reads the environment takes
// an Env so tests can hand it any set of variables without touching the
// process's own.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag {

class Env {
 public:
  Env() = default;
  explicit Env(const std::map<std::string, std::string>& vars) : vars_(vars.begin(), vars.end()) {}

  /// The current process environment.
  static Env from_process();

  std::optional<std::string> get(std::string_view name) const;
  bool has(std::string_view name) const { return get(name).has_value(); }
  std::string get_or(std::string_view name, std::string fallback) const;
  /// Variables whose name starts with `prefix`, sorted by name.
  std::vector<std::pair<std::string, std::string>> with_prefix(std::string_view prefix) const;
  void set(std::string name, std::string value) { vars_[std::move(name)] = std::move(value); }
  const std::map<std::string, std::string, std::less<>>& all() const { return vars_; }

 private:
  std::map<std::string, std::string, std::less<>> vars_;
};

}  // namespace gpudiag
