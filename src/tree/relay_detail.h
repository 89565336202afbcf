// What the two files of a tree judge share (relay.cpp, relay_copies.cpp):
// its timings and bounds, the keys of a checkpoint, and how an error or a
// death announcement is read. Internal to the Relay.
#pragma once

#include <chrono>
#include <cstddef>
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "store/store.h"

#include "store/store_limits.h"
#include "util/error.h"

namespace gpudiag::relay_detail {

/// How often a waiting relay looks again (announcements, lost judges, a
/// stop): every 200 ms, but a judge with more than kFewAbsent children still
/// absent every second. Each look asks again for every absent child: 256
/// group judges looking five times a second while their 128 leaders came in
/// cost the simulator's 262,144 ranks as much CPU as the leaders' own work.
/// Once only a few are left (the stragglers, a lost node) it looks often again.
inline constexpr auto kSlice = std::chrono::milliseconds(200);
inline constexpr auto kJudgeSlice = std::chrono::milliseconds(1000);
inline constexpr std::size_t kFewAbsent = 16;
/// A judge waiting for its parent's digest looks again after kSlice, then
/// after twice as long each time, up to kDigestSliceMost. The wait lasts as
/// long as the levels above wait for their slowest child, which grows with
/// a simulated step's length: at 200 ms a look (a wait and a read of the
/// parent's announcements) a supergroup judge's requests at the root's store
/// grew 1.9 times from 16,384 to 65,536 ranks. The wait returns as soon as
/// the digest is there: the slice bounds only how late an announcement is
/// copied (the digest carries an abort anyway).
inline constexpr auto kDigestSliceMost = std::chrono::milliseconds(2000);
inline std::chrono::milliseconds next_slice(std::chrono::milliseconds s) {
  return std::min(2 * s, kDigestSliceMost);
}
inline constexpr auto kForwardEvery = std::chrono::milliseconds(100);
inline constexpr auto kFailureGrace = std::chrono::seconds(2);
/// Once a judge learns that a judge below it is lost, that judge's children
/// have at least this long to report in its place, however soon the wait
/// would end otherwise (an announced failure cuts it to kFailureGrace): each
/// first finds its own parent gone, then tries the judges between (a refusal
/// is final at once, a silence up to 5 s; tree_host.cpp).
inline constexpr auto kLostJudgeGrace = std::chrono::seconds(8);
inline constexpr auto kAnswer = std::chrono::seconds(10);
/// A rank's record a leader passes on, at most (a real one is ~600 bytes).
inline constexpr std::size_t kMaxRecordBytes = 64 * 1024;
/// Records one rank may ask its leader for beyond its node (store_plane.h).
inline constexpr std::size_t kMaxNeeds = 64;

inline std::string cp(int seq) { return "cp/" + std::to_string(seq) + "/"; }
inline std::string tree_cp(int seq) { return "tree/cp/" + std::to_string(seq) + "/"; }

/// Where a child of a lost judge of `level` (1 a group, 2 a supergroup, ...)
/// says so, at the store one level above it.
/// Where a judge that learned of a lost judge below it says so to its
/// parent, which waits for it kLostJudgeGrace more (relay_levels.cpp,
/// busy_below): the value counts the lost judges it learned of.
inline std::string busy_key(int seq, int level, int index) {
  return tree_cp(seq) + "busy/" + TreeLayout::level_key(level) + "/" + std::to_string(index);
}
inline std::string lost_key(int level, int index) {
  return "tree/lost/" + (level == 1 ? std::string() : "group" + std::to_string(level) + "/") +
         std::to_string(index);
}

/// Keys a judge asks its own store for in one request, at most: a store
/// takes 2 per rank of its world (store_limits.h), and a judge that waits for
/// a lost judge's children asks for more than its own.
inline constexpr std::size_t kKeysPerRequest = 256;

/// MULTI_GET in requests of kKeysPerRequest keys.
inline std::vector<std::optional<std::string>> multi_get_sliced(Store& s,
                                                                const std::vector<std::string>& keys,
                                                                Deadline d) {
  std::vector<std::optional<std::string>> out;
  out.reserve(keys.size());
  for (std::size_t at = 0; at < keys.size(); at += kKeysPerRequest) {
    const auto end = keys.begin() + static_cast<long>(std::min(keys.size(), at + kKeysPerRequest));
    for (auto& v : s.multi_get({keys.begin() + static_cast<long>(at), end}, d))
      out.push_back(std::move(v));
  }
  return out;
}

/// The rank a death announcement names ("rank 12 [n1-4] (pid ...) ..."), so
/// the copy above can mark it dead too; -1 when it names none.
inline int named_rank(const std::string& text, int world) {
  if (text.rfind("rank ", 0) != 0) return -1;
  auto end = text.find_first_not_of("0123456789", 5);
  auto r = storelimits::parse_bounded(text.substr(5, end == std::string::npos ? end : end - 5), 0,
                                      world - 1);
  return r ? static_cast<int>(*r) : -1;
}

/// A store that is gone (its connection closed, or it cannot be reached), as
/// opposed to one that refused a request (too large, full): only the first
/// means its judge is lost.
inline bool store_gone(const Error& e) {
  const std::string t = e.one_line();
  return t.find("lost the store") != std::string::npos ||
         t.find("cannot reach the store") != std::string::npos ||
         t.find("stopped answering") != std::string::npos;
}

/// A wait the ranks say, at most an hour (the value comes from a store).
inline constexpr long long kMostWaitMs = 3600LL * 1000;

}  // namespace gpudiag::relay_detail
