#include "store/server_conn.h"

#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/strings.h"
#include "util/text.h"

namespace gpudiag {

namespace sw = storewire;

namespace {

constexpr std::size_t kReadChunk = 64 * 1024;
/// Bytes read from one client per event, so a fast sender cannot starve the rest.
constexpr std::size_t kReadPerEvent = 1u << 20;
/// Per parked key: the key's copies in StoreState and the hash tables' nodes.
constexpr std::size_t kParkedKeyOverhead = 96;
/// A buffer emptied of more than this gives its memory back.
constexpr std::size_t kKeepCapacity = 64 * 1024;

void release(std::string& s) {
  s.clear();
  if (s.capacity() > kKeepCapacity) s.shrink_to_fit();
}

/// `47 45 54 20 ("GET ")`: the first bytes of an unexpected stream, for logs.
std::string preview(std::string_view bytes) {
  bytes = bytes.substr(0, 8);
  std::string hex, text;
  for (unsigned char ch : bytes) {
    char b[4];
    std::snprintf(b, sizeof b, "%02x ", ch);
    hex += b;
    text += (ch >= 32 && ch < 127) ? static_cast<char>(ch) : '.';
  }
  return hex + "(\"" + text + "\")";
}

}  // namespace

std::string error_frame(std::uint32_t id, sw::ErrorCode code, const std::string& message) {
  return sw::Writer(sw::Type::error, id).u8(static_cast<std::uint8_t>(code)).str(message).finish();
}

ServerCore::ServerCore(TcpStoreServerOptions opts)
    : opts_(std::move(opts)),
      max_frame_(opts_.max_message_bytes ? opts_.max_message_bytes
                                         : storelimits::max_request_frame(opts_.world_size)),
      pause_at_(std::min(kPauseOutput, opts_.max_pending_output / 2)),
      max_keys_(storelimits::max_keys_per_request(opts_.world_size)),
      scratch_(kReadChunk),
      owners_(opts_.owned_keys ? opts_.world_size : 0, opts_.launcher_clients,
              opts_.leader_judges) {
  if (opts_.tree_role) owners_.set_tree(*opts_.tree_role);
  std::vector<StoreState::WaiterId> none;
  if (!opts_.served_by.empty()) state_.set("server", opts_.served_by, none);
}

std::uint32_t ServerCore::frame_cap(const Conn& c) const {
  return c.greeted ? max_frame_ : storelimits::kMaxHelloFrame;
}

Conn* ServerCore::find(std::uint64_t id) {
  auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : it->second.get();
}

void ServerCore::condemn(Conn& c, const std::string& why) {
  if (c.doomed) return;
  // `why` may quote what a client sent: printed escaped, on one line.
  if (log_budget()) spdlog::warn("store: dropping client {}: {}", c.peer, clean_text(why));
  ++dropped_;
  c.doomed = true;
  doomed_.push_back(c.id);
  // Its replies will never be sent: give their memory back now, not at the
  // end of the batch, so many clients condemned at once never add up.
  release(c.out);
  c.out_off = 0;
  account(c);
}

void ServerCore::bury() {
  for (auto id : doomed_)
    if (auto* c = find(id)) close_conn(*c);
  doomed_.clear();
}

void ServerCore::close_conn(Conn& c) {
  announce_if_lost(c);
  if (c.greeted) owners_.closed(c.id, c.rank);
  for (auto wid : c.parked) {
    state_.cancel(wid);
    pending_.erase(wid);
  }
  buffered_total_ -= c.accounted;
  if (c.refused) --refused_open_;
  if (!c.job_address.empty())
    if (auto it = job_by_ip_.find(c.job_address); it != job_by_ip_.end() && --it->second <= 0)
      job_by_ip_.erase(it);
  if (!c.outsider.empty())
    if (auto it = outsiders_open_.find(c.outsider); it != outsiders_open_.end() && --it->second <= 0)
      outsiders_open_.erase(it);
  conns_.erase(c.id);  // closes the socket, which also leaves the epoll set
  connections_ = conns_.size();
}

void ServerCore::on_event(Conn& c, std::uint32_t events) {
  if (c.paused && (events & (EPOLLHUP | EPOLLERR))) {
    // Gone while paused: its socket is not read, so say so here.
    c.doomed = true;
    doomed_.push_back(c.id);
  }
  if (!c.paused && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) on_readable(c);
  if (!c.doomed && (events & EPOLLOUT)) flush(c);
  if (!c.doomed && c.paused && c.pending_out() <= pause_at_ / 2) {
    // It read: its waiting requests are served, and its socket read again.
    c.paused = false;
    parse(c);
    if (!c.doomed && !c.paused) on_readable(c);
    if (!c.doomed) watch_events(c);
  }
  account(c);
}

bool ServerCore::pause_if_unread(Conn& c) {
  if (c.paused) return true;
  if (c.pending_out() < pause_at_) return false;
  c.paused = true;
  ++paused_;
  if (log_budget())
    spdlog::warn("store: client {} does not read its replies ({} bytes unread): its requests wait "
                 "until it does",
                 who(c), c.pending_out());
  watch_events(c);
  return true;
}

void ServerCore::watch_events(Conn& c) {
  std::uint32_t want = c.paused ? 0u : std::uint32_t(EPOLLIN | EPOLLRDHUP);
  if (c.pending_out() > 0) want |= EPOLLOUT;
  c.writing = (want & EPOLLOUT) != 0;
  if (want == c.events) return;
  c.events = want;
  set_events(c.fd.get(), c.id, want);
}

void ServerCore::on_readable(Conn& c) {
  // Reads at most what the connection may buffer: the rest of one frame of its
  // current cap (so 4 KiB before the handshake), parsing as bytes come, so a
  // client can never make the server hold more than a frame for it.
  bool eof = false;
  std::size_t got = 0;
  while (got < kReadPerEvent && !c.doomed && !c.paused) {
    const std::size_t cap = sw::kMagic.size() + sw::kLenBytes + frame_cap(c);
    const std::size_t held = c.in.size() - c.in_off;
    const std::size_t room = c.closing ? scratch_.size() : cap - std::min(cap, held);
    if (room == 0) break;  // cannot happen: parse() consumes or rejects a full frame
    ssize_t r = ::recv(c.fd.get(), scratch_.data(), std::min(room, scratch_.size()), 0);
    if (r > 0) {
      got += static_cast<std::size_t>(r);
      if (c.closing) continue;  // answered with an error already; ignore the rest
      c.in.append(scratch_.data(), static_cast<std::size_t>(r));
      parse(c);
      // Held to the server's total as the buffer grows, not after the event:
      // many clients each sending a large value at once must not add up first.
      account(c);
      shed_over_budget();
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    eof = true;  // orderly close or reset: the client is gone
    break;
  }
  if (eof && !c.doomed) {
    spdlog::debug("store: client {} disconnected", c.peer);
    c.doomed = true;
    doomed_.push_back(c.id);
  }
}

void ServerCore::parse(Conn& c) {
  if (c.torch) return parse_torch(c);
  std::string_view buf(c.in);
  buf.remove_prefix(c.in_off);
  if (!c.magic_ok && opts_.torch_clients && !buf.empty() && buf[0] != sw::kMagic[0] &&
      static_cast<unsigned char>(buf[0]) < 16) {
    // torch's first byte is a query type (0-15); gpudiag's is the magic's 'G'.
    if (c.refused) return condemn(c, "over the connection cap (a torch client)");
    // torch has no handshake: a connection of the job's own processes is
    // joined at its first byte; any other keeps its handshake timer.
    c.torch = true;
    c.greeted = !opts_.job_peers_by_process || c.job_peer;
    spdlog::debug("store: client {} speaks torch's TCPStore protocol", c.peer);
    return parse_torch(c);
  }
  if (!c.magic_ok) {
    auto n = std::min(buf.size(), sw::kMagic.size());
    if (buf.substr(0, n) != sw::kMagic.substr(0, n))
      return condemn(c, "not gpudiag's store protocol (first bytes " + preview(buf) + ")");
    if (n < sw::kMagic.size()) return;
    c.magic_ok = true;
    c.in_off += sw::kMagic.size();
    buf.remove_prefix(sw::kMagic.size());
  }
  while (!c.doomed && !c.closing && !pause_if_unread(c)) {
    sw::Frame f{};
    try {
      if (!sw::next_frame(buf, f, frame_cap(c))) break;
      c.greeted ? request(c, f) : hello(c, f);
    } catch (const sw::ProtocolError& e) {
      return condemn(c, e.what());
    }
    c.in_off += f.total;
    buf.remove_prefix(f.total);
  }
  if (c.in_off == c.in.size()) {
    release(c.in);
    c.in_off = 0;
  } else if (c.in_off > kKeepCapacity) {
    c.in.erase(0, c.in_off);
    c.in_off = 0;
  }
}

void ServerCore::request(Conn& c, const sw::Frame& f) {
  ++requests_;
  sw::Reader r(f.payload);
  std::vector<StoreState::WaiterId> woken;
  switch (f.type) {
    case sw::Type::set: {
      auto key = r.str();
      auto value = r.str();
      r.expect_done();
      if (auto why = owners_.refuse(c.id, c.rank, key, false, c.own_process)) {
        refuse(c, f.id, *why);
        break;
      }
      if (!fits(c, f.id, key, value.size())) break;
      state_.set(key, std::move(value), woken);
      reply(c, sw::Writer(sw::Type::ok, f.id).finish());
      break;
    }
    case sw::Type::get: {
      auto key = r.str();
      r.expect_done();
      park(c, f.id, {key}, true);
      break;
    }
    case sw::Type::try_get: {
      auto key = r.str();
      r.expect_done();
      auto* v = state_.find(key);
      reply(c, v ? sw::Writer(sw::Type::value, f.id).str(*v).finish()
                 : sw::Writer(sw::Type::not_found, f.id).finish());
      break;
    }
    case sw::Type::add: {
      auto key = r.str();
      auto delta = r.i64();
      r.expect_done();
      if (auto why = owners_.refuse_add(c.id, c.rank, key, delta, c.own_process)) {
        refuse(c, f.id, *why);
        break;
      }
      if (!fits(c, f.id, key, 20)) break;
      auto sum = state_.add(key, delta, woken);
      if (sum) owners_.added(c.id, key, *sum);
      if (auto claim = owners_.claim_answer(c.id, c.rank, key); sum && claim) sum = claim;
      reply(c, sum ? sw::Writer(sw::Type::integer, f.id).i64(*sum).finish()
                   : error_frame(f.id, sw::ErrorCode::not_an_integer,
                                 "the value of key '" + key +
                                     "' is not an integer, or the sum would overflow"));
      break;
    }
    case sw::Type::wait:
    case sw::Type::multi_get: {
      // The count first: a request for more keys than the job has is refused
      // before anything is built for it.
      auto n = sw::Reader(f.payload).u32();
      if (n > max_keys_) {
        refuse(c, f.id,
               std::to_string(n) + " keys in one request; this store takes at most " +
                   std::to_string(max_keys_) + " (2 per rank + 64)");
        break;
      }
      auto keys = r.strs();
      r.expect_done();
      if (f.type == sw::Type::wait)
        park(c, f.id, keys, false);
      else
        multi_get(c, f.id, keys);
      break;
    }
    case sw::Type::cancel: {
      auto target = r.u32();
      r.expect_done();
      cancel(c, target);
      break;
    }
    default:
      throw sw::ProtocolError("unknown request type " + std::to_string(int(f.type)));
  }
  wake(woken);
}

void ServerCore::park(Conn& c, std::uint32_t req, const std::vector<std::string>& keys,
                      bool is_get) {
  if (c.parked.size() >= storelimits::kMaxParkedPerConn)
    return refuse(c, req,
                  std::to_string(c.parked.size()) +
                      " requests already waiting on this "
                      "connection (limit " +
                      std::to_string(storelimits::kMaxParkedPerConn) + ")");
  auto wid = next_waiter_++;
  if (state_.park(wid, keys)) {
    reply(c, is_get ? sw::Writer(sw::Type::value, req).str(*state_.find(keys[0])).finish()
                    : sw::Writer(sw::Type::ok, req).finish());
    return;
  }
  std::size_t bytes = kParkedKeyOverhead;
  for (const auto& k : keys) bytes += 2 * k.size() + kParkedKeyOverhead;
  pending_.emplace(wid, Pending{c.id, req, is_get, is_get ? keys[0] : std::string(), bytes});
  c.parked.insert(wid);
  c.parked_bytes += bytes;
}

void ServerCore::cancel(Conn& c, std::uint32_t req) {
  for (auto wid : c.parked) {
    auto it = pending_.find(wid);
    if (it == pending_.end() || it->second.req != req) continue;
    state_.cancel(wid);
    c.parked_bytes -= it->second.bytes;
    pending_.erase(it);
    c.parked.erase(wid);
    return;
  }
}

void ServerCore::wake(const std::vector<StoreState::WaiterId>& woken) {
  for (auto wid : woken) {
    auto it = pending_.find(wid);
    if (it == pending_.end()) continue;
    Pending p = std::move(it->second);
    pending_.erase(it);
    Conn* c = find(p.conn);
    if (!c) continue;
    c->parked.erase(wid);
    c->parked_bytes -= p.bytes;
    if (p.torch) {
      reply(*c, std::string(1, '\0'));  // STOP_WAITING
      if (!c->doomed) parse_torch(*c);   // requests that came in behind the wait
      continue;
    }
    reply(*c, p.is_get ? sw::Writer(sw::Type::value, p.req).str(*state_.find(p.key)).finish()
                       : sw::Writer(sw::Type::ok, p.req).finish());
  }
}

void ServerCore::reply(Conn& c, std::string frame) {
  if (c.doomed) return;
  if (c.pending_out() + frame.size() > opts_.max_pending_output)
    return condemn(c, "it does not read its replies (" + std::to_string(c.pending_out()) +
                          " bytes queued and " + std::to_string(frame.size()) +
                          " more to queue, limit " + std::to_string(opts_.max_pending_output) +
                          ")");
  // Bytes already sent are dropped from the front only once they are at least
  // what is still pending, so each byte is moved a bounded number of times
  // (compacting 64 MiB for every 1 MiB reply froze the loop for seconds);
  // the buffer then grows by doubling, to at most twice the cap.
  if (c.out.size() + frame.size() > c.out.capacity() && c.out_off >= c.pending_out()) {
    c.out.erase(0, c.out_off);
    c.out_off = 0;
  }
  const std::size_t need = c.out.size() + frame.size();
  if (need > c.out.capacity())
    c.out.reserve(std::max(need, std::min(2 * c.out.capacity(), 2 * opts_.max_pending_output)));
  c.out.append(frame);
  flush(c);
  account(c);
  shed_over_budget();  // now, not at the end of the batch: one batch may queue a lot
}

void ServerCore::flush(Conn& c) {
  while (c.pending_out() > 0) {
    ssize_t w = ::send(c.fd.get(), c.out.data() + c.out_off, c.pending_out(), MSG_NOSIGNAL);
    if (w > 0) {
      c.out_off += static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    spdlog::debug("store: client {} went away: {}", c.peer, std::strerror(errno));
    c.doomed = true;
    doomed_.push_back(c.id);
    return;
  }
  if (c.pending_out() == 0) {
    release(c.out);
    c.out_off = 0;
    if (c.writing) watch_events(c);
    if (c.closing && !c.doomed) {
      c.doomed = true;
      doomed_.push_back(c.id);
    }
    return;
  }
  if (c.out_off > kKeepCapacity && c.out_off >= c.pending_out()) {  // amortized, as in reply()
    c.out.erase(0, c.out_off);
    c.out_off = 0;
  }
  if (!c.writing) watch_events(c);
}

}  // namespace gpudiag
