// The wire format of gpudiag's own key-value store (version 1).
//
// A connection starts with the 8 bytes "GPDSTORE" from the client, then both
// sides exchange frames. Every integer is little-endian, whatever the host.
//
//   frame   := u32 body_len | body            body_len capped (store_limits.h)
//   body    := u8 type | u32 request_id | payload
//   string  := u32 len | len bytes            (keys and values are bytes)
//   strings := u32 count | count x string
//
// The first client frame is HELLO {u16 version, string token, u8 auth,
// u32 rank claim, string client nonce} (a client of before the job secret
// ends after the token: auth none). Without a job secret on either side the
// server answers HELLO_OK {u16 version}. With one (auth 1, HMAC-SHA256), the
// server answers CHALLENGE {string server nonce}, the client AUTH {string
// client_proof}, and the server, once the proof checks, HELLO_OK {u16
// version, string server_proof}, which the client checks in turn, so both
// know the other holds the secret. Anything else is answered ERROR {u8 code,
// string message} and the server closes. After that, requests (client ->
// server) and their replies:
//
//   SET       {key, value}          -> OK
//   GET       {key}                 -> VALUE {value}      parked until key exists
//   TRY_GET   {key}                 -> VALUE {value} | NOT_FOUND
//   ADD       {key, i64 delta}      -> INTEGER {i64}      value kept as decimal text
//   WAIT      {strings keys}        -> OK                 parked until all exist
//   MULTI_GET {strings keys}        -> VALUES {u32 n, n x (u8 present, string)}
//   CANCEL    {u32 id}              -> (none)             drops parked request `id`
//   any       (bad request)         -> ERROR {u8 code, string message}
//
// A reply carries its request's id, so a client that gave up on a parked
// request (its deadline passed) recognises and skips a late answer.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::storewire {

inline constexpr std::string_view kMagic = "GPDSTORE";
inline constexpr std::uint16_t kVersion = 1;
/// The most any frame may be; each side caps lower (store_limits.h): 4 KiB
/// before the handshake, then what the request or reply needs.
inline constexpr std::uint32_t kMaxFrame = 64u << 20;
/// Bytes before a frame's body: u32 body_len.
inline constexpr std::size_t kLenBytes = 4;

enum class Type : std::uint8_t {
  // client -> server
  hello = 1,
  set = 2,
  get = 3,
  try_get = 4,
  add = 5,
  wait = 6,
  multi_get = 7,
  cancel = 8,
  auth = 9,  ///< the answer to CHALLENGE, during the handshake
  // server -> client
  hello_ok = 0x81,
  ok = 0x82,
  value = 0x83,
  not_found = 0x84,
  integer = 0x85,
  values = 0x86,
  error = 0x87,
  challenge = 0x88,  ///< the server's nonce, during the handshake
};

/// How a client proves it holds the job's secret (HELLO's `auth` byte).
enum class Auth : std::uint8_t { none = 0, hmac_sha256 = 1 };

enum class ErrorCode : std::uint8_t {
  token_mismatch = 1,
  version_mismatch = 2,
  bad_request = 3,
  not_an_integer = 4,
  /// A request past one of the store's limits (store_limits.h): too many keys,
  /// a value too large, the store full. The connection stays usable.
  over_limit = 5,
  /// Answer to a HELLO when the server holds all the connections it may
  /// (its descriptor limit or its cap); the server then closes.
  overloaded = 6,
  /// The handshake's proof of the job secret failed, or one side has a secret
  /// and the other none; the server then closes.
  secret_refused = 7,
};

/// A frame or payload that does not parse.
class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Builds one frame: Writer(type, id).str("k").i64(1).finish().
class Writer {
 public:
  Writer(Type type, std::uint32_t id);
  Writer& u8(std::uint8_t v);
  Writer& u16(std::uint16_t v);
  Writer& u32(std::uint32_t v);
  Writer& i64(std::int64_t v);
  Writer& str(std::string_view s);
  Writer& strs(const std::vector<std::string>& v);
  /// The frame with its length prefix filled in; the Writer is left empty.
  std::string finish();

 private:
  std::string buf_;
};

/// Reads a frame body; every accessor throws ProtocolError past the end.
class Reader {
 public:
  explicit Reader(std::string_view body) : rest_(body) {}
  std::uint8_t u8();
  std::uint16_t u16();
  std::uint32_t u32();
  std::int64_t i64();
  std::string str();
  std::vector<std::string> strs();
  bool done() const { return rest_.empty(); }
  /// Throws unless the whole body was consumed.
  void expect_done() const;

 private:
  std::string_view take(std::size_t n);
  std::string_view rest_;
};

/// A VALUES payload (MULTI_GET's reply) holding exactly `expected` entries;
/// throws ProtocolError for any other count before sizing anything by it.
std::vector<std::optional<std::string>> read_values(Reader& r, std::size_t expected);

/// A complete frame at the front of `buf`: its body and total size.
struct Frame {
  Type type;
  std::uint32_t id;
  std::string_view payload;
  std::size_t total;  ///< bytes to drop from `buf` once handled
};

/// The first complete frame in `buf`, or false when more bytes are needed.
/// Throws ProtocolError for a length above `max_frame` or below a header.
bool next_frame(std::string_view buf, Frame& out, std::uint32_t max_frame = kMaxFrame);

// --- the job secret's challenge-response (OpenSSL: RAND_bytes, HMAC-SHA256,
// CRYPTO_memcmp; nothing hand-written) ---------------------------------------

/// Bytes of a nonce and of a proof.
inline constexpr std::size_t kNonceBytes = 32, kProofBytes = 32;
/// A rank claim for a client that is not a rank (the launcher, a tool).
inline constexpr std::uint32_t kNoRank = 0xffffffffu;
/// The tree's judges (tree/tree.h, relay.h) claim what they speak for
/// in the same field, above any rank: node k, group g, a judge of a level
/// above the groups (supergroup s: level 2, up to level kMostClaimLevel), or
/// the root. The first connection to claim one owns it
/// (store/key_owners.h).
inline constexpr std::uint32_t kNodeClaim = 0xf1000000u, kGroupClaim = 0xf2000000u,
                               kRootClaim = 0xf3000000u, kUpperClaim = 0xf4000000u,
                               kClaimIndexMask = 0x00ffffffu;
/// Levels 2..kMostClaimLevel claim 0xf4.. to 0xfe..
inline constexpr int kMostClaimLevel = 12;
inline constexpr std::uint32_t node_claim(int k) { return kNodeClaim | (std::uint32_t(k) & kClaimIndexMask); }
/// The judge of group g at `level` (1: a group, 2: a supergroup, ...).
inline constexpr std::uint32_t group_claim(int g, int level = 1) {
  return (level <= 1 ? kGroupClaim : kUpperClaim + (std::uint32_t(level - 2) << 24)) |
         (std::uint32_t(g) & kClaimIndexMask);
}
inline constexpr bool is_tree_claim(std::uint32_t c) {
  return c != kNoRank && (c & ~kClaimIndexMask) >= kNodeClaim &&
         (c & ~kClaimIndexMask) <= kUpperClaim + (std::uint32_t(kMostClaimLevel - 2) << 24);
}
/// The level of a tree claim: 0 node, 1.. a group's judge, -1 the root.
inline constexpr int claim_level(std::uint32_t c) {
  const std::uint32_t kind = c & ~kClaimIndexMask;
  return kind == kNodeClaim ? 0 : kind == kGroupClaim ? 1 : kind == kRootClaim ? -1
                                                         : 2 + static_cast<int>((kind - kUpperClaim) >> 24);
}

/// kNonceBytes from RAND_bytes; throws gpudiag::Error when it fails.
std::string random_nonce();

/// The client's answer: HMAC-SHA256(secret, label || server nonce || client
/// nonce || token || rank), every field length-prefixed, so an answer to one
/// server nonce is worth nothing for another (a replay fails).
std::string client_proof(std::string_view secret, std::string_view server_nonce,
                         std::string_view client_nonce, std::string_view token, std::uint32_t rank);
/// The server's answer, under another label so a client's proof cannot be
/// reflected back as the server's.
std::string server_proof(std::string_view secret, std::string_view server_nonce,
                         std::string_view client_nonce, std::string_view token, std::uint32_t rank);
/// Constant-time comparison of two proofs (CRYPTO_memcmp).
bool proofs_equal(std::string_view a, std::string_view b);

}  // namespace gpudiag::storewire
