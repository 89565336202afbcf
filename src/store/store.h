// A key-value store where ranks meet: the control plane of a gpudiag job.
//
// Ranks publish who they are and which phase they reached, and wait for each
// other, through a Store. Every call takes a Deadline and throws
// gpudiag::TimeoutError naming the keys it was still waiting for when it
// passes; a lost connection throws gpudiag::Error naming the server address.
//
// Implementations:
//   TcpStoreClient  (tcp_store_client.h) gpudiag's own server (tcp_store_server.h), token-checked
//   TorchStoreClient(torch_store.h)      the c10d TCPStore a torchrun agent serves
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/deadline.h"

namespace gpudiag {

class Store {
 public:
  virtual ~Store() = default;

  /// Sets `key` to `value` (overwrites).
  virtual void set(const std::string& key, const std::string& value, Deadline deadline) = 0;
  /// Waits until `key` exists, then returns its value.
  virtual std::string get(const std::string& key, Deadline deadline) = 0;
  /// The value of `key` if it exists now; does not wait for it.
  virtual std::optional<std::string> try_get(const std::string& key, Deadline deadline) = 0;
  /// Adds `delta` to the integer at `key` (0 if absent); returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta, Deadline deadline) = 0;
  /// Waits until every key exists. Returns false (does not throw) if the deadline
  /// passes first, so the caller can find out which keys are missing.
  virtual bool wait(const std::vector<std::string>& keys, Deadline deadline) = 0;
  /// The values of `keys` that exist now (nullopt for absent ones), in one round trip.
  virtual std::vector<std::optional<std::string>> multi_get(const std::vector<std::string>& keys,
                                                            Deadline deadline) = 0;
  /// "host:port" of the server, for messages.
  virtual std::string address() const = 0;
  /// Whether the process serving the store is known to be running (true:
  /// slow, not dead), known to be stopped or gone (false), or cannot be told
  /// (nullopt: it runs on another host, or this store has no server).
  virtual std::optional<bool> server_running() { return std::nullopt; }
};

}  // namespace gpudiag
