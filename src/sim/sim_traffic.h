// The simulator's count of every request made to every store of the tree
// (simulator.h): a CountingStore wraps each store connection a simulated
// rank, leader or judge holds and adds, per request, the bytes of its keys
// and values both ways and one request, to a table kept per process by the
// level of the store served (0 a node's, 1 a group's, 2 a supergroup's, ...,
// the root's last), by who asked (the store's members: its ranks or its
// children's judges; its own judge; or a relay past its lost parent, which
// reports a level up: a lost judge's children are not members there, and
// counted as members they made one member of a level with few, as the root's
// 2 supergroups at 262,144 ranks, look like 3,000 requests a checkpoint) and
// by checkpoint (the key's
// cp/<n>/ or tree/cp/<n>/; announcements, joins and goodbyes apart). Unlike
// the planes' and relays' own counts (what a checkpoint needs), it sees the
// polls, waits and retries too: what grows with the job shows up here.
// Each process sends its table to the parent as one line ("traffic ...").
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "store/store.h"

namespace gpudiag::sim {

struct TrafficTable {
  static constexpr int kLevels = 6;  ///< store levels counted (deeper ones add to the last)
  static constexpr int kSlots = 6;   ///< 5 checkpoints, then everything else
  /// 0 the store's members, 1 its own judge, 2 a relay past its lost parent
  static constexpr int kWho = 3;
  static constexpr int kCells = kLevels * kWho * kSlots;
  std::array<std::atomic<std::uint64_t>, kCells> bytes{}, requests{};

  static int cell(int level, int who, int slot) {
    level = level < 0 ? 0 : level >= kLevels ? kLevels - 1 : level;
    return (level * kWho + who) * kSlots + slot;
  }
  /// The checkpoint a key belongs to (cp/<n>/..., tree/cp/<n>/..., need/<n>/...),
  /// kSlots - 1 for any other.
  static int slot_of(const std::string& key) {
    std::size_t at = key.rfind("tree/", 0) == 0 ? 5 : 0;
    if (key.compare(at, 3, "cp/") == 0) at += 3;
    else if (key.compare(at, 5, "need/") == 0) at += 5;
    else return kSlots - 1;
    int n = 0;
    bool digit = false;
    for (; at < key.size() && key[at] >= '0' && key[at] <= '9'; ++at, digit = true)
      n = n * 10 + (key[at] - '0');
    return digit && n < kSlots - 1 ? n : kSlots - 1;
  }
  void add(int level, int who, const std::string& key, std::uint64_t b) {
    const int c = cell(level, who, slot_of(key));
    bytes[c].fetch_add(b, std::memory_order_relaxed);
    requests[c].fetch_add(1, std::memory_order_relaxed);
  }
  std::string line() const {
    std::string out = "traffic";
    for (int c = 0; c < kCells; ++c)
      out += " " + std::to_string(bytes[c].load()) + " " + std::to_string(requests[c].load());
    return out;
  }
  /// Adds a child process's line; false when it is not one.
  bool add_line(const std::string& text) {
    if (text.rfind("traffic ", 0) != 0) return false;
    std::istringstream in(text.substr(8));
    for (int c = 0; c < kCells; ++c) {
      std::uint64_t b = 0, r = 0;
      if (!(in >> b >> r)) return false;
      bytes[c] += b;
      requests[c] += r;
    }
    return true;
  }
  std::uint64_t sum_bytes(int level, int who, int slot = -1) const {
    std::uint64_t s = 0;
    for (int k = 0; k < kSlots; ++k)
      if (slot < 0 || slot == k) s += bytes[cell(level, who, k)].load();
    return s;
  }
  std::uint64_t sum_requests(int level, int who, int slot = -1) const {
    std::uint64_t s = 0;
    for (int k = 0; k < kSlots; ++k)
      if (slot < 0 || slot == k) s += requests[cell(level, who, k)].load();
    return s;
  }
};

/// This process's table (each simulator process is forked before it counts).
inline TrafficTable& traffic() {
  static TrafficTable t;
  return t;
}

/// A store whose every request is counted in traffic() as one to a store of
/// `level`, asked by its members (who 0), its own judge (who 1) or a relay
/// whose parent is lost (who 2: a connection past the parent).
class CountingStore : public Store {
 public:
  CountingStore(std::unique_ptr<Store> s, int level, int who)
      : own_(std::move(s)), s_(*own_), level_(level), who_(who) {}
  CountingStore(Store& s, int level, int who) : s_(s), level_(level), who_(who) {}
  void set(const std::string& k, const std::string& v, Deadline d) override {
    count(k, k.size() + v.size());
    s_.set(k, v, d);
  }
  std::string get(const std::string& k, Deadline d) override {
    auto v = s_.get(k, d);
    count(k, k.size() + v.size());
    return v;
  }
  std::optional<std::string> try_get(const std::string& k, Deadline d) override {
    auto v = s_.try_get(k, d);
    count(k, k.size() + (v ? v->size() : 0));
    return v;
  }
  std::int64_t add(const std::string& k, std::int64_t v, Deadline d) override {
    count(k, k.size() + 8);
    return s_.add(k, v, d);
  }
  bool wait(const std::vector<std::string>& k, Deadline d) override {
    count(k.empty() ? std::string() : k[0], keys_size(k));
    return s_.wait(k, d);
  }
  std::vector<std::optional<std::string>> multi_get(const std::vector<std::string>& k,
                                                    Deadline d) override {
    auto v = s_.multi_get(k, d);
    std::uint64_t b = keys_size(k);
    for (const auto& x : v) b += x ? x->size() : 0;
    count(k.empty() ? std::string() : k[0], b);
    return v;
  }
  std::string address() const override { return s_.address(); }
  std::optional<bool> server_running() override { return s_.server_running(); }

 private:
  static std::uint64_t keys_size(const std::vector<std::string>& k) {
    std::uint64_t b = 0;
    for (const auto& x : k) b += x.size();
    return b;
  }
  void count(const std::string& key, std::uint64_t b) { traffic().add(level_, who_, key, b); }
  std::unique_ptr<Store> own_;
  Store& s_;
  int level_, who_;
};

/// One line a store level, for stderr: what its members (`members` of them,
/// each a `member`: "rank", "node", ...) and its judges (`judges`, each a
/// `judge`) sent and read there a checkpoint, on average, and the member's
/// bytes by checkpoint (`checkpoints` of them, then everything else), and
/// what relays past a lost parent sent and read there, all of them together:
///   sim: traffic at level 1 (groups' stores): a node 5907 B in 3.1 requests,
///   a group 412345 B in 340.2 requests a checkpoint; from past their parents
///   0 B in 0.0 requests a checkpoint in all; a node's by checkpoint: 7012 5011 6000
///   5000 5000, else 120
inline std::string traffic_line(const TrafficTable& t, int level, const std::string& stores,
                                const std::string& member, long long members,
                                const std::string& judge, long long judges, int checkpoints) {
  auto per = [](std::uint64_t v, long long n, int cps) {
    return n > 0 ? static_cast<double>(v) / static_cast<double>(n) / cps : 0.0;
  };
  char b[512];
  std::snprintf(b, sizeof b,
                "sim: traffic at level %d (%s): a %s %.0f B in %.1f requests, a %s %.0f B in %.1f "
                "requests a checkpoint; from past their parents %.0f B in %.1f requests a checkpoint "
                "in all; a %s's by checkpoint:",
                level, stores.c_str(), member.c_str(), per(t.sum_bytes(level, 0), members, checkpoints),
                per(t.sum_requests(level, 0), members, checkpoints), judge.c_str(),
                per(t.sum_bytes(level, 1), judges, checkpoints),
                per(t.sum_requests(level, 1), judges, checkpoints),
                per(t.sum_bytes(level, 2), 1, checkpoints), per(t.sum_requests(level, 2), 1, checkpoints),
                member.c_str());
  std::string out = b;
  for (int k = 0; k < TrafficTable::kSlots; ++k) {
    std::snprintf(b, sizeof b, "%s%.0f", k == TrafficTable::kSlots - 1 ? ", else " : " ",
                  per(t.sum_bytes(level, 0, k), members, 1));
    out += b;
  }
  return out;
}

}  // namespace gpudiag::sim
