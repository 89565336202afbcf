// The store server's second protocol: torch's TCPStore (torch/csrc/distributed/
// c10d/TCPStore.cpp, TCPStoreMasterDaemon in 1.x, TCPStoreBackend in 2.x), so a
// torch program under gpudiag launch can use the launcher's store as it uses
// torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True).
//
// A connection whose first byte is below 16 (a query type; gpudiag's own
// begins with the magic's 'G') is torch's. No framing: each request is parsed
// field by field once all its bytes are here (integers little-endian; a
// string is u64 length + bytes). Two dialects, as the client side
// (torch_store.h) knows them: legacy (torch 1.x) SET=0 COMPARE_SET=1 GET=2
// ADD=3 CHECK=4 WAIT=5 GETNUMKEYS=6 WATCH_KEY=7 DELETE_KEY=8; validated (2.x)
// opens with VALIDATE=0 + u32 0x3C85F7CE and numbers SET=1 ... DELETE_KEY=8,
// CANCEL_WAIT=12. Replies: GET and COMPARE_SET a string, ADD/GETNUMKEYS/
// DELETE_KEY an i64, CHECK a byte (0 ready, 1 not), WAIT the byte 0 once
// every key exists (parked until then), CANCEL_WAIT the byte 1. SET has none.
//
// Bounded and refused as gpudiag's own requests are: key and value sizes,
// keys per CHECK/WAIT, the store's total, parked waits per connection; what
// torch's server would throw on (GET of a missing key, ADD to a value that is
// not an integer, WATCH_KEY, APPEND and the multi-key requests) closes the
// connection with a log line, as torch's server does. Every key lives under
// "torch" + the client's key; torch's own clients start theirs with "/".
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "store/server_conn.h"
#include "store/store_limits.h"
#include "util/text.h"

namespace gpudiag {

namespace {

constexpr std::uint32_t kValidateMagic = 0x3C85F7CE;
constexpr const char* kSpace = "torch";

/// A cursor over one request's bytes; `ok` false once it ran past the end.
struct Cursor {
  std::string_view buf;
  std::size_t at = 0;
  bool ok = true;
  bool take(void* out, std::size_t n) {
    if (!ok || buf.size() - at < n) return ok = false;
    std::memcpy(out, buf.data() + at, n);
    at += n;
    return true;
  }
  std::uint64_t u64() {
    unsigned char b[8] = {};
    take(b, 8);
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | b[i];
    return v;
  }
  std::uint8_t u8() {
    std::uint8_t v = 0;
    take(&v, 1);
    return v;
  }
  /// A string of at most `cap` bytes; `too_big` set when its length is more.
  std::string str(std::size_t cap, bool& too_big) {
    const std::uint64_t n = u64();
    if (!ok) return {};
    if (n > cap) {
      too_big = true;
      ok = false;
      return {};
    }
    if (buf.size() - at < n) return ok = false, std::string();
    std::string s(buf.substr(at, n));
    at += n;
    return s;
  }
};

std::string le64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

std::string vec(const std::string& v) { return le64(v.size()) + v; }

}  // namespace

void ServerCore::parse_torch(Conn& c) {
  while (!c.doomed && !c.closing && !pause_if_unread(c)) {
    std::string_view buf(c.in);
    buf.remove_prefix(c.in_off);
    if (buf.empty()) break;
    if (!c.parked.empty() && c.torch_validated && static_cast<std::uint8_t>(buf[0]) == 12) {
      // The CANCEL_WAIT (2.x) of a client whose wait timed out. Other requests
      // behind a parked WAIT are served at once, as torch's servers do, so a
      // 1.x client whose wait timed out keeps a usable connection.
      for (auto wid : c.parked) {
        state_.cancel(wid);
        if (auto it = pending_.find(wid); it != pending_.end()) {
          c.parked_bytes -= it->second.bytes;
          pending_.erase(it);
        }
      }
      c.parked.clear();
      reply(c, std::string(1, '\1'));  // WAIT_CANCELED
      c.in_off += 1;
      continue;
    }
    const std::size_t used = torch_request(c, buf);
    if (used == 0) break;
    c.in_off += used;
  }
  if (c.in_off == c.in.size()) {
    c.in.clear();
    c.in_off = 0;
  } else if (c.in_off > (64u << 10)) {
    c.in.erase(0, c.in_off);
    c.in_off = 0;
  }
}

std::size_t ServerCore::torch_request(Conn& c, std::string_view buf) {
  const auto type0 = static_cast<std::uint8_t>(buf[0]);
  if (!c.torch_validated && type0 == 0) {
    // VALIDATE (2.x) or a legacy SET: the next four bytes tell them apart.
    if (buf.size() < 5) return 0;
    std::uint32_t magic = 0;
    for (int i = 4; i >= 1; --i) magic = magic << 8 | static_cast<unsigned char>(buf[i]);
    if (magic == kValidateMagic) {
      c.torch_validated = true;
      return 5;
    }
  }
  // The type, in legacy numbering (validated is one more; 12 is CANCEL_WAIT).
  int type = type0;
  if (c.torch_validated) {
    if (type0 == 12) type = 100;
    else if (type0 == 0 || type0 > 8) type = -1;
    else type = type0 == 8 ? 8 : type0 - 1;  // 2.x has no WATCH_KEY: DELETE_KEY stays 8
  }
  Cursor in{buf, 1};
  bool too_big = false;
  const std::size_t key_cap = storelimits::kMaxKeyBytes, value_cap = storelimits::kMaxValueBytes;
  auto key = [&] { return kSpace + in.str(key_cap, too_big); };
  auto refuse_torch = [&](const std::string& why) {
    condemn(c, "torch client: " + why);
    return buf.size();
  };
  std::vector<StoreState::WaiterId> woken;
  ++requests_;
  switch (type) {
    case 0: {  // SET
      auto k = key();
      auto v = in.str(value_cap, too_big);
      if (!in.ok) break;
      if (state_.bytes() + k.size() + v.size() + StoreState::kKeyOverhead > opts_.max_stored_bytes)
        return refuse_torch("the store is full");
      if (!state_.find(k)) ++torch_keys_;
      state_.set(k, std::move(v), woken);
      wake(woken);
      return in.at;
    }
    case 1: {  // COMPARE_SET
      auto k = key();
      auto expected = in.str(value_cap, too_big);
      auto desired = in.str(value_cap, too_big);
      if (!in.ok) break;
      if (state_.bytes() + k.size() + desired.size() + StoreState::kKeyOverhead >
          opts_.max_stored_bytes)
        return refuse_torch("the store is full");
      const std::string* now = state_.find(k);
      std::string answer;
      if (!now) {
        if (expected.empty()) {
          ++torch_keys_;
          answer = desired;
          state_.set(k, std::move(desired), woken);
        } else {
          answer = expected;  // as torch's server answers a missing key
        }
      } else {
        if (*now == expected) state_.set(k, std::move(desired), woken);
        answer = *state_.find(k);
      }
      reply(c, vec(answer));
      wake(woken);
      return in.at;
    }
    case 2: {  // GET
      auto k = key();
      if (!in.ok) break;
      const std::string* v = state_.find(k);
      if (!v) return refuse_torch("GET of a key that does not exist: " + clean_text(k.substr(5, 64)));
      reply(c, vec(*v));
      return in.at;
    }
    case 3: {  // ADD
      auto k = key();
      std::uint64_t delta = in.u64();
      if (!in.ok) break;
      const bool fresh = !state_.find(k);
      // A new key holds at most 20 digits: held to the store's total as SET is.
      if (state_.bytes() + k.size() + 20 + StoreState::kKeyOverhead > opts_.max_stored_bytes)
        return refuse_torch("the store is full");
      auto sum = state_.add(k, static_cast<std::int64_t>(delta), woken);
      if (!sum) return refuse_torch("ADD to a value that is not an integer, or an overflow");
      if (fresh) ++torch_keys_;
      reply(c, le64(static_cast<std::uint64_t>(*sum)));
      wake(woken);
      return in.at;
    }
    case 4:    // CHECK
    case 5: {  // WAIT
      const std::uint64_t n = in.u64();
      if (!in.ok) break;
      // torch's clients (and gpudiag's, probing the dialect) check up to 128
      // keys at once whatever the job's size.
      if (n > std::max<std::size_t>(max_keys_, 1024))
        return refuse_torch(std::to_string(n) + " keys in one request");
      std::vector<std::string> keys;
      for (std::uint64_t i = 0; i < n && in.ok; ++i) keys.push_back(key());
      if (!in.ok) break;
      if (type == 4) {
        bool ready = true;
        for (const auto& k : keys) ready = ready && state_.find(k);
        reply(c, std::string(1, ready ? '\0' : '\1'));
        return in.at;
      }
      if (c.parked.size() >= storelimits::kMaxParkedPerConn)
        return refuse_torch("too many waits on one connection");
      const auto wid = next_waiter_++;
      if (state_.park(wid, keys)) {
        reply(c, std::string(1, '\0'));
        return in.at;
      }
      std::size_t bytes = 64;
      for (const auto& k : keys) bytes += 2 * k.size() + 64;
      pending_.emplace(wid, Pending{c.id, 0, false, std::string(), bytes, true});
      c.parked.insert(wid);
      c.parked_bytes += bytes;
      return in.at;
    }
    case 6:  // GETNUMKEYS
      reply(c, le64(torch_keys_));
      return 1;
    case 8: {  // DELETE_KEY
      auto k = key();
      if (!in.ok) break;
      const bool gone = state_.erase(k);
      if (gone) --torch_keys_;
      reply(c, le64(gone ? 1 : 0));
      return in.at;
    }
    case 100:  // CANCEL_WAIT with nothing parked (the wait was answered): WAIT_CANCELED
      reply(c, std::string(1, '\1'));
      return 1;
    default:
      return refuse_torch("query type " + std::to_string(type0) +
                          " is not served here (WATCH_KEY, APPEND and multi-key requests)");
  }
  // Incomplete, or a length past its cap.
  --requests_;
  if (too_big) return refuse_torch("a key or value longer than this store takes");
  return 0;
}

}  // namespace gpudiag
