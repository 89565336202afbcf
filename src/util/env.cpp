#include "util/env.h"

#include <unistd.h>

namespace gpudiag {

Env Env::from_process() {
  Env env;
  for (char** p = environ; p && *p; ++p) {
    std::string_view kv(*p);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.vars_.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

std::optional<std::string> Env::get(std::string_view name) const {
  auto it = vars_.find(name);
  if (it == vars_.end()) return std::nullopt;
  return it->second;
}

std::string Env::get_or(std::string_view name, std::string fallback) const {
  auto v = get(name);
  return v ? *v : std::move(fallback);
}

std::vector<std::pair<std::string, std::string>> Env::with_prefix(std::string_view prefix) const {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = vars_.lower_bound(prefix); it != vars_.end() && it->first.starts_with(prefix); ++it)
    out.emplace_back(it->first, it->second);
  return out;
}

}  // namespace gpudiag
