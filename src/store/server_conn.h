// The protocol half of TcpStoreServer: what happens on a connection's bytes.
//
// ServerCore owns the connections, parses their input into frames
// (store/store_wire.h), checks the handshake, serves requests from a
// StoreState, parks GET/WAIT requests until their keys exist and answers them
// when they do, and queues replies with a bound on what a client may leave
// unread. The socket loop (tcp_store_server.cpp) feeds it readiness events and
// is asked, through set_events, to watch a socket for writability.
//
// Bounds (store_limits.h): a connection never buffers more input than one
// frame of its current cap (4 KiB before the handshake), reading stops at
// that; requests with more keys than the world needs, values over the value
// cap, SET/ADD into a full store and parking past the per-connection count are
// answered with ERROR over_limit; every connection's buffered bytes (input,
// output, parked keys) are accounted, and shed_over_budget() condemns the
// largest holder while the total is over its cap; a condemned connection's
// queued output is freed at once. A connection whose unread replies reach
// kPauseOutput (4 MiB) is paused: its socket is not read and its requests not parsed
// until it has read them down to half of that (flow control, as TCP's own), so
// a client that asks for much and reads nothing costs a few MiB and no copying,
// and a rank that reads slowly is slowed, never dropped.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "store/key_owners.h"
#include "store/peer_identity.h"
#include "store/socket.h"
#include "store/store_state.h"
#include "store/store_wire.h"
#include "store/tcp_store_server.h"

namespace gpudiag {

/// An ERROR reply frame to request `id`.
std::string error_frame(std::uint32_t id, storewire::ErrorCode code, const std::string& message);

/// One client connection.
struct Conn {
  Conn(net::Fd f, std::uint64_t i, std::string p) : fd(std::move(f)), id(i), peer(std::move(p)) {}
  net::Fd fd;
  std::uint64_t id;
  std::string peer;  ///< "ip:port", for log lines
  std::string in;    ///< received, not yet parsed (from in_off on)
  std::size_t in_off = 0;
  std::string out;  ///< queued replies (from out_off on)
  std::size_t out_off = 0;
  bool magic_ok = false;    ///< the 8-byte magic arrived
  bool greeted = false;     ///< the handshake succeeded
  bool closing = false;     ///< close once `out` is flushed (after an ERROR)
  bool writing = false;     ///< EPOLLOUT is being watched
  bool paused = false;      ///< its requests wait until it reads its replies
  std::uint32_t events = EPOLLIN | EPOLLRDHUP;  ///< what the loop watches on its socket
  bool doomed = false;      ///< to be closed at the end of this event batch
  bool refused = false;     ///< accepted past the connection cap: answer HELLO "overloaded"
  bool challenged = false;  ///< CHALLENGE sent; its AUTH answer is awaited
  std::string server_nonce, client_nonce;
  std::uint32_t rank = storewire::kNoRank;  ///< the rank it claimed at HELLO
  std::unordered_set<StoreState::WaiterId> parked;
  std::size_t parked_bytes = 0;  ///< memory its parked requests hold
  std::size_t accounted = 0;     ///< its share of ServerCore::buffered_total_
  bool torch = false;            ///< speaks torch's TCPStore protocol (server_torch.cpp)
  bool torch_validated = false;  ///< ... its later dialect (VALIDATE first, types + 1)
  bool job_peer = false;         ///< held by the job's own processes (peer_identity.h)
  bool own_process = false;      ///< held by the serving process itself (own_process_trusted)
  std::optional<net::PeerSocket> peer_socket;  ///< on loopback: the peer's socket, if found
  std::string outsider;          ///< else, with job_peers_by_process: its peer ("uid 65534")
  std::string job_address;       ///< a remote job connection's address (job_by_ip_)
  std::size_t pending_out() const { return out.size() - out_off; }
};

class ServerCore {
 public:
  explicit ServerCore(TcpStoreServerOptions opts);
  virtual ~ServerCore() = default;
  TcpStoreServer::Stats stats() const {
    return {connections_, dropped_, requests_, refused_, paused_};
  }
  /// Unread replies at which a connection's requests wait for it to read
  /// (half of max_pending_output when that is smaller).
  static constexpr std::size_t kPauseOutput = 4u << 20;

 protected:
  /// Asks the loop to watch `fd` (tagged `tag`) for `events` (EPOLL* bits).
  virtual void set_events(int fd, std::uint64_t tag, std::uint32_t events) = 0;

  Conn* find(std::uint64_t id);
  /// Handles readiness `events` (EPOLL* bits) on `c`.
  void on_event(Conn& c, std::uint32_t events);
  /// torch's TCPStore protocol on `c` (server_torch.cpp): parses and answers
  /// the complete requests in its buffer; false when it was condemned.
  void parse_torch(Conn& c);
  /// One torch request at the front of `buf`; 0 when incomplete, else its size.
  std::size_t torch_request(Conn& c, std::string_view buf);
  std::size_t torch_keys_ = 0;  ///< keys torch clients hold ("torch" + their key)
  /// Logs why `c` is dropped and marks it for bury().
  void condemn(Conn& c, const std::string& why);
  /// Closes the connections condemned during this batch.
  void bury();
  /// While the bytes buffered across connections exceed their cap, condemns
  /// the connection holding the most. Safe to call from any handler: it never
  /// closes a connection, only marks it (and frees its queued output).
  void shed_over_budget();
  /// Closes `c` now, forgetting its parked requests.
  void close_conn(Conn& c);
  /// True when a warning about a misbehaving client may be logged now: at
  /// most 10 a second, so a flood of them cannot flood the job's log too
  /// (how many were left out is logged with the next one).
  bool log_budget();
  /// "1024 open; descriptors: ulimit -n 1024": why a new client is turned away.
  virtual std::string overloaded_why() const = 0;

  TcpStoreServerOptions opts_;
  std::unordered_map<std::uint64_t, std::unique_ptr<Conn>> conns_;
  std::atomic<std::size_t> connections_{0}, dropped_{0}, requests_{0}, refused_{0}, paused_{0};
  std::size_t refused_open_ = 0;  ///< open connections with `refused` set
  std::unordered_map<std::string, int> outsiders_open_;  ///< by peer (Conn::outsider)
  std::unordered_map<std::string, int> job_by_ip_;       ///< job connections per remote address

 private:
  void on_readable(Conn& c);
  void flush(Conn& c);
  /// True (and `c` paused, its socket no longer read) when its unread replies
  /// have reached kPauseOutput: the parsers stop before the next request.
  bool pause_if_unread(Conn& c);
  /// Asks the loop for what `c` needs now: input unless paused, output while
  /// replies are pending.
  void watch_events(Conn& c);
  void parse(Conn& c);
  void hello(Conn& c, const storewire::Frame& f);
  /// Checks the AUTH answer to `c`'s challenge; greets or refuses `c`.
  void auth(Conn& c, const storewire::Frame& f);
  /// Answers `c`'s handshake with ERROR `code` and closes it once sent.
  void refuse_hello(Conn& c, std::uint32_t id, storewire::ErrorCode code,
                    const std::string& message);
  /// The handshake succeeded: `c` is greeted, and its rank claim recorded.
  void greet(Conn& c);
  /// `c` is closing: when it owns a rank that did not say goodbye, announces
  /// that rank's death (deaths_from_connections).
  void announce_if_lost(const Conn& c);
  /// "client 10.0.0.5:4242 (claiming rank 3)", for log lines.
  static std::string who(const Conn& c);
  void request(Conn& c, const storewire::Frame& f);
  void park(Conn& c, std::uint32_t req, const std::vector<std::string>& keys, bool is_get);
  void multi_get(Conn& c, std::uint32_t id, const std::vector<std::string>& keys);
  /// True when a key and a value of `value_bytes` may be stored; else refuses `id`.
  bool fits(Conn& c, std::uint32_t id, const std::string& key, std::size_t value_bytes);
  void cancel(Conn& c, std::uint32_t req);
  void wake(const std::vector<StoreState::WaiterId>& woken);
  void reply(Conn& c, std::string frame);
  /// Answers request `id` with ERROR over_limit and logs why (once a second).
  void refuse(Conn& c, std::uint32_t id, const std::string& why);
  /// Re-counts what `c` holds into buffered_total_.
  void account(Conn& c);
  /// The connection holding the most buffered bytes; nullptr when none.
  Conn* largest();
  std::string over_budget_why(const Conn& c) const;
  /// The largest frame `c` may send now.
  std::uint32_t frame_cap(const Conn& c) const;

  /// A parked request: who asked, and for which key when it is a GET.
  struct Pending {
    std::uint64_t conn;
    std::uint32_t req;
    bool is_get;
    std::string key;
    std::size_t bytes;  ///< counted in its connection's parked_bytes
    bool torch = false;  ///< a torch WAIT: its reply is the byte 0 (STOP_WAITING)
  };
  std::uint32_t max_frame_;  ///< after the handshake
  std::size_t pause_at_;     ///< kPauseOutput, or half of max_pending_output
  std::size_t max_keys_;     ///< per WAIT / MULTI_GET
  std::size_t buffered_total_ = 0;
  std::vector<char> scratch_;  ///< recv buffer, so idle connections hold no read capacity
  std::chrono::steady_clock::time_point log_window_end_{};
  std::size_t logged_in_window_ = 0, suppressed_ = 0;
  StoreState state_;
  KeyOwners owners_;
  std::unordered_map<StoreState::WaiterId, Pending> pending_;
  StoreState::WaiterId next_waiter_ = 1;
  std::vector<std::uint64_t> doomed_;
};

}  // namespace gpudiag
