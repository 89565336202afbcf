// The data behind gpudiag's store server: keys, values, and the requests
// parked until keys appear. No sockets here, so the logic is tested directly.
//
// A parked request (a GET or a WAIT) is a Waiter counting the keys it still
// misses. Keys are never deleted, so only a key's creation can wake a waiter:
// creating a key decrements the count of every waiter listed on it, and
// waiters reaching zero are returned to the caller to be answered. A waiter is
// removed when it wakes, is cancelled, or its connection goes away.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gpudiag {

class StoreState {
 public:
  using WaiterId = std::uint64_t;

  /// Sets `key`; appends the waiters this wakes to `woken`.
  void set(const std::string& key, std::string value, std::vector<WaiterId>& woken);
  /// Adds `delta` to the decimal integer at `key` (0 if absent) and stores the
  /// result as decimal text; nullopt (and no change) when the value is not an
  /// integer or the sum would overflow 64 bits.
  std::optional<std::int64_t> add(const std::string& key, std::int64_t delta,
                                  std::vector<WaiterId>& woken);
  /// The value of `key`, valid until the next change; nullptr when absent.
  const std::string* find(const std::string& key) const;
  /// Removes `key`; false when it was not there. Parked waiters stay parked.
  bool erase(const std::string& key);

  /// Parks `id` until every key exists. Returns true (and parks nothing) when
  /// they all exist already.
  bool park(WaiterId id, const std::vector<std::string>& keys);
  /// Forgets a parked waiter; no-op when unknown.
  void cancel(WaiterId id);

  std::size_t key_count() const { return values_.size(); }
  /// Bytes of keys and values stored.
  /// What the stored keys and values hold, each key charged kKeyOverhead
  /// more for its node in the map (so many tiny keys count as what they cost).
  std::size_t bytes() const { return bytes_; }
  static constexpr std::size_t kKeyOverhead = 96;
  std::size_t parked_count() const { return missing_.size(); }

 private:
  void created(const std::string& key, std::vector<WaiterId>& woken);

  std::unordered_map<std::string, std::string> values_;
  std::size_t bytes_ = 0;
  struct Parked {
    std::size_t missing;            ///< how many of its keys are still absent
    std::vector<std::string> keys;  ///< the keys it was listed under
  };
  std::unordered_map<WaiterId, Parked> missing_;
  /// Absent key -> waiters listed on it.
  std::unordered_map<std::string, std::vector<WaiterId>> by_key_;
};

}  // namespace gpudiag
