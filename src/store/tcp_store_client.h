// A Store backed by gpudiag's own store server (TcpStoreServer), which
// `gpudiag launch` or rank 0 runs. Wire format: store/store_wire.h.
//
// The constructor connects, retrying until its deadline because ranks start at
// different times and the server may come up after this client, then shakes
// hands with the job token and, when the job has a secret, proves it knows the
// secret (an HMAC of the server's fresh nonce) and checks that the server
// knows it too (its HMAC of this client's nonce), so a rank also knows it
// reached the real store (store_wire.h). Every call after that is one request and its reply
// under the call's own deadline (poll-based I/O, never a blocking read). GET
// and WAIT are parked in the server, so waiting costs no traffic; when a
// deadline passes the client cancels the parked request and skips its late
// reply if one comes. Calls are serialised by a mutex, so threads may share one.
// Replies are not trusted: a frame past the reply cap, a payload that does not
// parse, or a count other than the one asked for is a one-line "malformed
// reply" error (exit 1), never a crash or an allocation sized by the peer.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "store/socket.h"
#include "store/store.h"
#include "store/store_wire.h"

namespace gpudiag {

class TcpStoreClient : public Store {
 public:
  /// Connects to host:port and presents `token`, retrying until `deadline`.
  /// With a non-empty `secret` it proves the job's secret under the claim of
  /// being `rank` (storewire::kNoRank: not a rank), and requires the server's
  /// proof. Throws UsageError when the host does not resolve, the token is
  /// refused ("this store belongs to another job"), or the secret does not
  /// match on both sides ("refused this rank's job secret"), TimeoutError when
  /// nothing answers by the deadline (naming host:port and the local route).
  /// With `refused_by`, refused connections are retried only until then (an
  /// address published by a server that listened: refused means it is gone).
  TcpStoreClient(std::string host, int port, std::string token, Deadline deadline,
                 std::string secret = {}, std::uint32_t rank = storewire::kNoRank,
                 std::optional<Deadline> refused_by = std::nullopt);

  /// True when both sides proved the job's secret at the handshake; false for
  /// an unauthenticated store (no secret), whose keys any local user who can
  /// compute the token may write.
  bool authenticated() const { return !secret_.empty(); }

  void set(const std::string& key, const std::string& value, Deadline deadline) override;
  std::string get(const std::string& key, Deadline deadline) override;
  std::optional<std::string> try_get(const std::string& key, Deadline deadline) override;
  std::int64_t add(const std::string& key, std::int64_t delta, Deadline deadline) override;
  bool wait(const std::vector<std::string>& keys, Deadline deadline) override;
  std::vector<std::optional<std::string>> multi_get(const std::vector<std::string>& keys,
                                                    Deadline deadline) override;
  /// From the server's end of this client's connection, when it is on this
  /// host: the state of the process that holds it (peer_identity.h).
  std::optional<bool> server_running() override;
  std::string address() const override { return address_; }

 private:
  struct Reply {
    storewire::Type type;
    std::string payload;
  };
  void connect(Deadline deadline, std::optional<Deadline> refused_by = std::nullopt);
  /// The handshake after HELLO's first answer `f`: CHALLENGE/AUTH when the
  /// job has a secret, then HELLO_OK (`joined`), or an ERROR frame left in `f`.
  /// Returns how the I/O went.
  net::Io finish_handshake(storewire::Frame& f, const std::string& client_nonce, Deadline deadline,
                           bool& joined);
  /// Reads one handshake frame into `f`; the I/O outcome.
  net::Io read_hello_frame(storewire::Frame& f, Deadline deadline);
  [[noreturn]] void secret_refused(const std::string& why);
  /// Sends one request and returns its reply, or nullopt when `deadline`
  /// passes first (a parked request is then cancelled).
  std::optional<Reply> call(storewire::Writer request, std::uint32_t id, Deadline deadline);
  /// call() that throws TimeoutError naming `what` when the deadline passes.
  Reply call_or_throw(storewire::Writer request, std::uint32_t id, Deadline deadline,
                      const std::string& what);
  [[noreturn]] void lost();
  /// Throws "malformed reply" (a peer that is not this job's store, or a
  /// corrupted stream) and drops the connection.
  [[noreturn]] void malformed(const std::string& what);
  /// Runs `parse` on a reply of type `want`; anything else, or a payload that
  /// does not parse or has bytes left over, is malformed().
  template <typename F>
  auto decode(const Reply& reply, storewire::Type want, F parse) {
    try {
      if (reply.type != want) throw storewire::ProtocolError("an unexpected reply type");
      storewire::Reader r(reply.payload);
      auto out = parse(r);
      r.expect_done();
      return out;
    } catch (const storewire::ProtocolError& e) {
      malformed(e.what());
    }
  }
  /// Throws the server's ERROR reply as a gpudiag::Error.
  [[noreturn]] void server_error(const std::string& payload);

  std::string host_;
  int port_;
  std::string token_;
  std::string secret_;
  std::uint32_t rank_;
  std::string address_;
  net::Fd fd_;
  std::string in_;  ///< received bytes not yet consumed
  std::uint32_t next_id_ = 1;
  std::mutex mu_;
};

}  // namespace gpudiag
