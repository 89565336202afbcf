// gpudiag's key-value store server, run by `gpudiag launch` (or rank 0) so
// the ranks of a job can meet. Wire format: rendezvous/store_wire.h.
//
// One thread runs a single-threaded epoll loop over non-blocking sockets, so
// hundreds of clients cost one thread. GET and WAIT requests for absent keys
// are parked in the server and answered when the keys appear: clients never
// poll. Misbehaving peers are dropped with a log line and never stall the
// others: bytes that are not the protocol's magic, a message above the size
// cap, a connection that has not finished its handshake by the deadline, a
// wrong job token (answered with an error first), and a client that does not
// read its replies (its pending output passes a bound).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace gpudiag {

struct TcpStoreServerOptions {
  /// Address to listen on; empty means every interface (IPv6 and IPv4).
  std::string bind_host;
  /// Port to listen on; 0 picks a free one (see TcpStoreServer::port()).
  int port = 0;
  /// Clients must present this token in their handshake.
  std::string token;
  /// Largest message accepted; a larger length prefix drops the client.
  std::uint32_t max_message_bytes = 64u << 20;
  /// Replies queued for one client beyond this drop it (it does not read).
  std::size_t max_pending_output = 256u << 20;
  /// A connection must complete its handshake within this time.
  std::chrono::milliseconds handshake_timeout{10000};
};

class TcpStoreServer {
 public:
  /// Binds and listens, then serves from a background thread.
  /// Throws UsageError when the port is in use (naming it and what to do)
  /// or the bind address is not local.
  explicit TcpStoreServer(TcpStoreServerOptions options);
  /// Stops the loop, closes every connection (their clients see the store
  /// as lost) and joins the thread.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  /// The port actually bound (the chosen one when options.port was 0).
  int port() const;

  /// Counters for tests and logs, read while the server runs.
  struct Stats {
    std::size_t connections = 0;  ///< open now
    std::size_t dropped = 0;      ///< misbehaving peers dropped so far
    std::size_t requests = 0;     ///< requests served so far
  };
  Stats stats() const;

 private:
  class Loop;
  std::unique_ptr<Loop> loop_;
};

}  // namespace gpudiag
