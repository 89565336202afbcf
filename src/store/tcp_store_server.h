// gpudiag's key-value store server, run by `gpudiag launch` (or rank 0) so
// the ranks of a job can meet. Wire format: store/store_wire.h.
//
// One thread runs a single-threaded epoll loop over non-blocking sockets, so
// hundreds of clients cost one thread. GET and WAIT requests for absent keys
// are parked in the server and answered when the keys appear: clients never
// poll. Misbehaving peers are dropped with a log line and never stall the
// others: bytes that are not the protocol's magic, a message above the size
// cap (4 KiB before the handshake, what the protocol needs after it), a
// connection that has not finished its handshake by the deadline, a wrong job
// token or a failed proof of the job secret (answered with an error first), a client that does not
// read its replies (its pending output passes a bound), and, when the bytes buffered across all
// clients pass a bound, the client holding the most. Requests past a limit (too many keys, a value
// too large, the store full, too many parked requests) are answered with an error. Connections are
// capped below the descriptor limit, which the server raises to its hard limit at start; at the cap
// the oldest connection still in its handshake makes room, or the new client is told the store is
// full. All limits: store/store_limits.h.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "store/key_owners.h"

#include "store/store_limits.h"

namespace gpudiag {

struct TcpStoreServerOptions {
  /// Address to listen on; empty means every interface (IPv6 and IPv4).
  std::string bind_host;
  /// Port to listen on; 0 picks a free one (see TcpStoreServer::port()).
  int port = 0;
  /// Clients must present this token in their handshake.
  std::string token;
  /// The job secret (HMAC key); empty: unauthenticated. With one, a client
  /// must answer the handshake's challenge with HMAC(secret, nonce, token,
  /// rank claim) and gets the server's own proof back; a client that cannot
  /// is told so and dropped with a warning (at most ten such lines a second).
  std::string secret;
  /// Ranks in the job (0: not known, storelimits::kDefaultWorld assumed). The
  /// caps on keys per request, message size and connections follow from it,
  /// and the server refuses to start when the descriptor limit cannot hold it.
  int world_size = 0;
  /// Largest message accepted after the handshake (0: what the protocol needs
  /// for world_size); a larger length prefix drops the client.
  std::uint32_t max_message_bytes = 0;
  /// Replies queued for one client beyond this drop it (it does not read).
  std::size_t max_pending_output = storelimits::kMaxReplyFrame;
  /// Bytes buffered across all clients beyond this drop the one holding most.
  std::size_t max_buffered_total = storelimits::kMaxServerBuffered;
  /// Bytes of keys and values stored beyond which SET and ADD are refused.
  std::size_t max_stored_bytes = storelimits::kMaxStoredBytes;
  /// Connections held at most (0: from world_size and the descriptor limit).
  std::size_t max_connections = 0;
  /// Who serves the store, "rank 0 [node1]" or "gpudiag launch [node1]": set
  /// under the key `server` from the start (no client may change it), so a
  /// rank can name it when it stops answering.
  std::string served_by;
  /// Rank ownership of keys (store/key_owners.h): a rank's records are
  /// taken only from the first connection that claimed that rank. Needs
  /// world_size. `launcher_clients`: connections that claim no rank may
  /// report deaths and failures (gpudiag launch's); else they may not.
  bool owned_keys = false;
  bool launcher_clients = false;
  /// Also serve torch's TCPStore clients (torch's wire format, no
  /// authentication: torch has none), in a key space of their own ("torch"
  /// + their key) that gpudiag's protocol cannot reach and they cannot leave.
  bool torch_clients = false;
  /// With no launcher to see a rank's process end (ranks started by hand):
  /// when the connection that owns a rank closes before the rank said
  /// goodbye (its `bye/<r>` key), the server announces that rank's death
  /// itself, as a launcher would. Needs owned_keys.
  bool deaths_from_connections = false;
  /// Connections this store expects, when fewer than world_size (a node
  /// leader's store: its node's ranks and the leader), for the descriptor check.
  int expected_clients = 0;
  /// A node leader's store (tree/relay.h, key_owners.h): the leader's
  /// launcher connection writes the digest and other nodes' records.
  bool leader_judges = false;
  /// A connection must complete its handshake within this time.
  std::chrono::milliseconds handshake_timeout{10000};
  /// The serving process is the job's launcher (store/peer_identity.h):
  /// a loopback connection whose socket a descendant of this process or a
  /// process of this user holds, the first `job_conns_per_ip` connections
  /// from each other address, and any that proves the job secret, are the
  /// job's and keep their connection however silent (torch's clients keep a
  /// second one that never speaks). Any other connection that
  /// has not proved the job secret keeps the handshake timer (a torch
  /// client, which cannot prove it, is served until then) and counts against
  /// its peer (a uid on loopback, else an address): at most
  /// kOutsiderConnsPerPeer open at once.
  /// The store serves the tree of judges (key_owners.h, set_tree): keys are
  /// owned by the places the judges claim, never by "a launcher".
  std::optional<TreeStoreRole> tree_role;
  /// A loopback connection held by this very process (its own judges) may
  /// write every key: the tree's stores, whose judges run where they are served.
  bool own_process_trusted = false;
  bool job_peers_by_process = false;
  int job_conns_per_ip = 0;
  static constexpr int kOutsiderConnsPerPeer = 4;
};

class TcpStoreServer {
 public:
  /// Raises the descriptor limit, binds and listens, then serves from a
  /// background thread. Throws UsageError when the port is in use (naming it
  /// and what to do), the bind address is not local, or the descriptor limit
  /// cannot hold a connection per rank (naming `ulimit -n`).
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
    std::size_t refused = 0;      ///< requests and clients refused at a limit
    std::size_t paused = 0;       ///< times a client's requests waited for it to read
  };
  Stats stats() const;

 private:
  class Loop;
  std::unique_ptr<Loop> loop_;
};

}  // namespace gpudiag
