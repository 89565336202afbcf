// The in-memory store (see memory_store.h): a map under one mutex, and a
// condition variable for waits.
#include "store/memory_store.h"

#include "util/error.h"

namespace gpudiag {

void MemoryStore::set(const std::string& key, const std::string& value, Deadline) {
  {
    std::lock_guard lock(mu_);
    auto [it, fresh] = values_.try_emplace(key);
    if (fresh) bytes_ += key.size();
    bytes_ = bytes_ - it->second.size() + value.size();
    it->second = value;
  }
  changed_.notify_all();
}

std::string MemoryStore::get(const std::string& key, Deadline deadline) {
  if (!wait({key}, deadline))
    throw TimeoutError("timed out waiting for key '" + key + "' in " + name_);
  return *try_get(key, deadline);
}

std::optional<std::string> MemoryStore::try_get(const std::string& key, Deadline) {
  std::lock_guard lock(mu_);
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::int64_t MemoryStore::add(const std::string& key, std::int64_t delta, Deadline) {
  std::int64_t now = 0;
  {
    std::lock_guard lock(mu_);
    auto [it, fresh] = values_.try_emplace(key, "0");
    if (fresh) bytes_ += key.size() + 1;
    try {
      now = std::stoll(it->second) + delta;
    } catch (const std::exception&) {
      throw Error(ExitCode::broken, "key '" + key + "' in " + name_ + " is not a number");
    }
    bytes_ -= it->second.size();
    it->second = std::to_string(now);
    bytes_ += it->second.size();
  }
  changed_.notify_all();
  return now;
}

bool MemoryStore::wait(const std::vector<std::string>& keys, Deadline deadline) {
  std::unique_lock lock(mu_);
  auto all = [&] {
    for (const auto& k : keys)
      if (!values_.count(k)) return false;
    return true;
  };
  return changed_.wait_until(lock, deadline.when(), all);
}

std::vector<std::optional<std::string>> MemoryStore::multi_get(
    const std::vector<std::string>& keys, Deadline) {
  std::lock_guard lock(mu_);
  std::vector<std::optional<std::string>> out;
  out.reserve(keys.size());
  for (const auto& k : keys) {
    auto it = values_.find(k);
    out.push_back(it == values_.end() ? std::nullopt : std::optional<std::string>(it->second));
  }
  return out;
}

std::size_t MemoryStore::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

std::size_t MemoryStore::drop_prefix(const std::string& prefix) {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (auto it = values_.begin(); it != values_.end();)
    if (it->first.compare(0, prefix.size(), prefix) == 0) {
      bytes_ -= it->first.size() + it->second.size();
      it = values_.erase(it);
      ++n;
    } else {
      ++it;
    }
  return n;
}

}  // namespace gpudiag
