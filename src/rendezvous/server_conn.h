// The protocol half of TcpStoreServer: what happens on a connection's bytes.
//
// ServerCore owns the connections, parses their input into frames
// (rendezvous/store_wire.h), checks the handshake, serves requests from a
// StoreState, parks GET/WAIT requests until their keys exist and answers them
// when they do, and queues replies with a bound on what a client may leave
// unread. The socket loop (tcp_store_server.cpp) feeds it readiness events and
// is asked, through set_events, to watch a socket for writability.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "rendezvous/socket.h"
#include "rendezvous/store_state.h"
#include "rendezvous/store_wire.h"
#include "rendezvous/tcp_store_server.h"

namespace gpudiag {

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
  bool magic_ok = false;  ///< the 8-byte magic arrived
  bool greeted = false;   ///< the handshake succeeded
  bool closing = false;   ///< close once `out` is flushed (after an ERROR)
  bool writing = false;   ///< EPOLLOUT is being watched
  bool doomed = false;    ///< to be closed at the end of this event batch
  std::unordered_set<StoreState::WaiterId> parked;
  std::size_t pending_out() const { return out.size() - out_off; }
};

class ServerCore {
 public:
  explicit ServerCore(TcpStoreServerOptions opts) : opts_(std::move(opts)) {}
  virtual ~ServerCore() = default;
  TcpStoreServer::Stats stats() const { return {connections_, dropped_, requests_}; }

 protected:
  /// Asks the loop to watch `fd` (tagged `tag`) for `events` (EPOLL* bits).
  virtual void set_events(int fd, std::uint64_t tag, std::uint32_t events) = 0;

  Conn* find(std::uint64_t id);
  /// Handles readiness `events` (EPOLL* bits) on `c`.
  void on_event(Conn& c, std::uint32_t events);
  /// Logs why `c` is dropped and marks it for bury().
  void condemn(Conn& c, const std::string& why);
  /// Closes the connections condemned during this batch.
  void bury();

  TcpStoreServerOptions opts_;
  std::unordered_map<std::uint64_t, std::unique_ptr<Conn>> conns_;
  std::atomic<std::size_t> connections_{0}, dropped_{0}, requests_{0};

 private:
  void on_readable(Conn& c);
  void flush(Conn& c);
  void parse(Conn& c);
  void hello(Conn& c, const storewire::Frame& f);
  void request(Conn& c, const storewire::Frame& f);
  void park(Conn& c, std::uint32_t req, const std::vector<std::string>& keys, bool is_get);
  void cancel(Conn& c, std::uint32_t req);
  void wake(const std::vector<StoreState::WaiterId>& woken);
  void reply(Conn& c, std::string frame);
  /// Closes `c` now, forgetting its parked requests.
  void close_conn(Conn& c);

  /// A parked request: who asked, and for which key when it is a GET.
  struct Pending {
    std::uint64_t conn;
    std::uint32_t req;
    bool is_get;
    std::string key;
  };
  StoreState state_;
  std::unordered_map<StoreState::WaiterId, Pending> pending_;
  StoreState::WaiterId next_waiter_ = 1;
  std::vector<std::uint64_t> doomed_;
};

}  // namespace gpudiag
