#include "store/store_state.h"

#include <unordered_set>

#include "util/strings.h"

namespace gpudiag {

void StoreState::created(const std::string& key, std::vector<WaiterId>& woken) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return;
  for (WaiterId id : it->second) {
    auto m = missing_.find(id);
    if (m == missing_.end()) continue;
    if (--m->second.missing == 0) {
      woken.push_back(id);
      missing_.erase(m);
    }
  }
  by_key_.erase(it);
}

void StoreState::set(const std::string& key, std::string value, std::vector<WaiterId>& woken) {
  auto it = values_.find(key);
  if (it != values_.end()) {
    bytes_ = bytes_ - it->second.size() + value.size();
    it->second = std::move(value);
    return;  // an existing key wakes nobody
  }
  bytes_ += key.size() + value.size() + kKeyOverhead;
  values_.emplace(key, std::move(value));
  created(key, woken);
}

std::optional<std::int64_t> StoreState::add(const std::string& key, std::int64_t delta,
                                            std::vector<WaiterId>& woken) {
  std::int64_t current = 0;
  auto it = values_.find(key);
  if (it != values_.end()) {
    auto parsed = parse_int(it->second);
    if (!parsed) return std::nullopt;
    current = *parsed;
  }
  std::int64_t result = 0;
  if (__builtin_add_overflow(current, delta, &result)) return std::nullopt;  // no wrap-around
  set(key, std::to_string(result), woken);
  return result;
}

bool StoreState::erase(const std::string& key) {
  auto it = values_.find(key);
  if (it == values_.end()) return false;
  bytes_ -= key.size() + it->second.size() + kKeyOverhead;
  values_.erase(it);
  return true;
}

const std::string* StoreState::find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

bool StoreState::park(WaiterId id, const std::vector<std::string>& keys) {
  std::unordered_set<std::string_view> seen;
  std::vector<std::string> absent;
  for (const auto& k : keys)
    if (!values_.count(k) && seen.insert(k).second) absent.push_back(k);
  if (absent.empty()) return true;
  for (const auto& k : absent) by_key_[k].push_back(id);
  missing_[id] = Parked{absent.size(), std::move(absent)};
  return false;
}

void StoreState::cancel(WaiterId id) {
  auto m = missing_.find(id);
  if (m == missing_.end()) return;
  for (const auto& k : m->second.keys) {
    auto it = by_key_.find(k);
    if (it == by_key_.end()) continue;
    std::erase(it->second, id);
    if (it->second.empty()) by_key_.erase(it);
  }
  missing_.erase(m);
}

}  // namespace gpudiag
