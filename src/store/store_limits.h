// The bounds on everything a rank or the store host takes from the store or
// the wire, in one place, so docs/rendezvous.md and the code agree.
//
// Nothing read from a store is trusted: a key may have been written by a
// process outside the job (torchrun's agent store has no authentication, and
// gpudiag's job token is a name, not a secret). So every number read from a
// store value is parsed with bounds (parse_bounded), every count is capped by
// the world size, and every text shown to the user is cut to one printable
// line (store_text). On the wire, the server caps a frame before the
// handshake, a frame after it, the keys of one request, the requests one
// connection may leave parked, the bytes buffered per connection and in
// total, the bytes stored, and the connections it holds open. Each cap is
// what the protocol legitimately needs, derived from the world size where
// that grows with the job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpudiag::storelimits {

/// The largest value a rank stores: a checkpoint record (a few KB; its link
/// row grows with the world, ~22 bytes a rank) or a failure's text.
inline constexpr std::size_t kMaxValueBytes = 1u << 20;
/// The longest key ("cp/12/4095", "failure/3", ...; torch keys add a prefix).
inline constexpr std::size_t kMaxKeyBytes = 512;
/// The longest job token a client may present (GPUDIAG_TOKEN, SLURM ids, ...).
inline constexpr std::size_t kMaxTokenBytes = 1024;
/// A frame before the handshake: HELLO is a version and a token.
inline constexpr std::uint32_t kMaxHelloFrame = 4096;
/// A reply frame: a MULTI_GET of every rank's record at the largest scale.
inline constexpr std::uint32_t kMaxReplyFrame = 64u << 20;
/// World size assumed when a server is not told the job's (tests, tools).
inline constexpr int kDefaultWorld = 4096;
/// Parked requests (GET/WAIT) one connection may have: a rank has one at a
/// time, plus a few cancelled ones whose late answer is on its way.
inline constexpr std::size_t kMaxParkedPerConn = 16;
/// Bytes buffered by the server (unparsed input + unsent output) across all
/// connections; past it the connection holding the most is shed.
inline constexpr std::size_t kMaxServerBuffered = 256u << 20;
/// Bytes of keys and values the server stores; past it SET/ADD are refused.
inline constexpr std::size_t kMaxStoredBytes = 1u << 30;
/// Descriptors the store host keeps for itself (log files, pipes, sockets of
/// its own) beyond one per client.
inline constexpr int kFdMargin = 64;

/// Keys one WAIT or MULTI_GET may name: a checkpoint waits for every rank; a
/// report of missing ranks reads two keys for each.
constexpr std::size_t max_keys_per_request(int world) {
  return 2 * static_cast<std::size_t>(world > 0 ? world : kDefaultWorld) + 64;
}

/// The largest request frame after the handshake: a SET of the largest value,
/// or a WAIT/MULTI_GET of the most keys, whichever is bigger.
constexpr std::uint32_t max_request_frame(int world) {
  std::size_t set = kMaxValueBytes + kMaxKeyBytes + 64;
  std::size_t keys = max_keys_per_request(world) * (4 + kMaxKeyBytes) + 64;
  std::size_t m = set > keys ? set : keys;
  return m > kMaxReplyFrame ? kMaxReplyFrame : static_cast<std::uint32_t>(m);
}

/// Connections a server holds at most: every rank, every node's launcher,
/// and room for short-lived ones (a rank retrying, a probe).
constexpr std::size_t max_connections(int world) {
  return 2 * static_cast<std::size_t>(world > 0 ? world : kDefaultWorld) + 256;
}

/// Whole-string decimal integer within [min, max]; nullopt for anything else
/// (not a number, trailing bytes, out of range).
std::optional<long long> parse_bounded(std::string_view text, long long min, long long max);

/// `text` as one printable line of at most `max` bytes: control bytes become
/// '?', and a longer text is cut with "..." (for store values shown to users).
std::string store_text(std::string_view text, std::size_t max = 1024);

}  // namespace gpudiag::storelimits
