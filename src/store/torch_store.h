// A Store backed by PyTorch's c10d TCPStore: under `torchrun` the elastic
// agent already serves one on MASTER_ADDR:MASTER_PORT (and sets
// TORCHELASTIC_USE_AGENT_STORE=True), so ranks join it as clients.
//
// Wire format (both dialects; integers little-endian as on every host torch
// runs on; no framing, each query is parsed field by field):
//
//   query   := u8 type | args
//   string  := u64 len | len bytes
//   SET     string key, string value        -> (no reply)
//   GET     string key                      -> string value  (key must exist)
//   ADD     string key, i64 delta           -> i64 new value (stored as decimal text)
//   CHECK   u64 n, n x string key           -> u8 0 READY | 1 NOT_READY
//   WAIT    u64 n, n x string key           -> u8 0 STOP_WAITING, once all exist
//   GETNUMKEYS                              -> i64
//   CANCEL_WAIT (validated only)            -> u8 1 WAIT_CANCELED (after a late STOP_WAITING)
//
// Two dialects exist. "legacy" (torch 1.x and early 2.x, e.g. Debian's 1.13)
// numbers the types SET=0 COMPARE_SET=1 GET=2 ADD=3 CHECK=4 WAIT=5 GETNUMKEYS=6.
// "validated" (later 2.x, both the classic and the libuv server) requires a
// first message VALIDATE=0 + u32 0x3C85F7CE and shifts every type by one:
// SET=1 GET=3 ADD=4 CHECK=5 WAIT=6 GETNUMKEYS=7 CANCEL_WAIT=12.
//
// The dialect is found with one probe that each server reads in a harmless
// way: VALIDATE, GETNUMKEYS, GETNUMKEYS, then CHECK of 128 empty keys. A
// validated server answers 17 bytes. A legacy server reads a SET whose key
// length (the magic's bytes and the next four) exceeds any allocation, drops
// that connection at once and carries on; the client then reconnects and
// speaks legacy.
//
// A legacy server is confirmed with GETNUMKEYS on the new connection, so a
// server that is no TCPStore at all (gpudiag's own store drops both) is named
// as such instead of looking like a lost store.
//
// A wait whose deadline passes is cancelled with CANCEL_WAIT where the server
// has it; otherwise the connection is closed (the server forgets its waits)
// and the next call reconnects. Keys are namespaced under the caller's prefix
// (torch's own clients put theirs under "/"), so they never clash.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "store/socket.h"
#include "store/store.h"

namespace gpudiag {

class TorchStoreClient : public Store {
 public:
  enum class Dialect { legacy, validated };

  /// Connects to the TCPStore at host:port, retrying until `deadline`, and
  /// finds its dialect. Every key is sent as `prefix` + key, e.g.
  /// "gpudiag/<TORCHELASTIC_RUN_ID>/<TORCHELASTIC_RESTART_COUNT>/".
  TorchStoreClient(std::string host, int port, std::string prefix, Deadline deadline);

  Dialect dialect() const { return dialect_; }

  void set(const std::string& key, const std::string& value, Deadline deadline) override;
  std::string get(const std::string& key, Deadline deadline) override;
  std::optional<std::string> try_get(const std::string& key, Deadline deadline) override;
  std::int64_t add(const std::string& key, std::int64_t delta, Deadline deadline) override;
  bool wait(const std::vector<std::string>& keys, Deadline deadline) override;
  std::vector<std::optional<std::string>> multi_get(const std::vector<std::string>& keys,
                                                    Deadline deadline) override;
  std::string address() const override { return address_; }

 private:
  struct Codes {
    std::uint8_t set, get, add, check, wait, num_keys;
    int cancel_wait;  ///< -1 when the dialect has none
  };
  const Codes& codes() const;
  Dialect detect(Deadline deadline);
  /// Connects (when not connected) in the known dialect.
  void ensure_connected(Deadline deadline);
  void send(const std::string& bytes, Deadline deadline, const std::string& what);
  void recv(void* out, std::size_t n, Deadline deadline, const std::string& what);
  std::string recv_string(Deadline deadline, const std::string& what);
  /// Gives up a WAIT whose deadline passed, leaving the connection in sync.
  void abandon_wait();
  [[noreturn]] void lost();

  std::string host_;
  int port_;
  std::string prefix_;
  std::string address_;
  Dialect dialect_ = Dialect::legacy;
  net::Fd fd_;
  std::mutex mu_;
};

}  // namespace gpudiag
