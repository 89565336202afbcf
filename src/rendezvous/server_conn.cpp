#include "rendezvous/server_conn.h"

#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace gpudiag {

namespace sw = storewire;

namespace {

constexpr std::size_t kReadChunk = 64 * 1024;
/// Bytes read from one client per event, so a fast sender cannot starve the rest.
constexpr std::size_t kReadPerEvent = 1u << 20;

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

std::string error_frame(std::uint32_t id, sw::ErrorCode code, const std::string& message) {
  return sw::Writer(sw::Type::error, id).u8(static_cast<std::uint8_t>(code)).str(message).finish();
}

}  // namespace

Conn* ServerCore::find(std::uint64_t id) {
  auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : it->second.get();
}

void ServerCore::condemn(Conn& c, const std::string& why) {
  if (c.doomed) return;
  spdlog::warn("store: dropping client {}: {}", c.peer, why);
  ++dropped_;
  c.doomed = true;
  doomed_.push_back(c.id);
}

void ServerCore::bury() {
  for (auto id : doomed_)
    if (auto* c = find(id)) close_conn(*c);
  doomed_.clear();
}

void ServerCore::close_conn(Conn& c) {
  for (auto wid : c.parked) {
    state_.cancel(wid);
    pending_.erase(wid);
  }
  conns_.erase(c.id);  // closes the socket, which also leaves the epoll set
  connections_ = conns_.size();
}

void ServerCore::on_event(Conn& c, std::uint32_t events) {
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) on_readable(c);
  if (!c.doomed && (events & EPOLLOUT)) flush(c);
}

void ServerCore::on_readable(Conn& c) {
  bool eof = false;
  std::size_t got = 0;
  while (got < kReadPerEvent) {
    auto old = c.in.size();
    c.in.resize(old + kReadChunk);
    ssize_t r = ::recv(c.fd.get(), c.in.data() + old, kReadChunk, 0);
    c.in.resize(old + static_cast<std::size_t>(std::max<ssize_t>(r, 0)));
    if (r > 0) {
      got += static_cast<std::size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    eof = true;  // orderly close or reset: the client is gone
    break;
  }
  if (c.closing) {
    c.in.clear();  // answered with an error already; ignore the rest
    c.in_off = 0;
  } else {
    parse(c);
  }
  if (eof && !c.doomed) {
    spdlog::debug("store: client {} disconnected", c.peer);
    c.doomed = true;
    doomed_.push_back(c.id);
  }
}

void ServerCore::parse(Conn& c) {
  std::string_view buf(c.in);
  buf.remove_prefix(c.in_off);
  if (!c.magic_ok) {
    auto n = std::min(buf.size(), sw::kMagic.size());
    if (buf.substr(0, n) != sw::kMagic.substr(0, n))
      return condemn(c, "not gpudiag's store protocol (first bytes " + preview(buf) + ")");
    if (n < sw::kMagic.size()) return;
    c.magic_ok = true;
    c.in_off += sw::kMagic.size();
    buf.remove_prefix(sw::kMagic.size());
  }
  while (!c.doomed && !c.closing) {
    sw::Frame f{};
    try {
      if (!sw::next_frame(buf, f, opts_.max_message_bytes)) break;
      c.greeted ? request(c, f) : hello(c, f);
    } catch (const sw::ProtocolError& e) {
      return condemn(c, e.what());
    }
    c.in_off += f.total;
    buf.remove_prefix(f.total);
  }
  if (c.in_off == c.in.size()) {
    c.in.clear();
    c.in_off = 0;
  } else if (c.in_off > (1u << 20)) {
    c.in.erase(0, c.in_off);
    c.in_off = 0;
  }
}

void ServerCore::hello(Conn& c, const sw::Frame& f) {
  if (f.type != sw::Type::hello) throw sw::ProtocolError("first message is not a handshake");
  sw::Reader r(f.payload);
  auto version = r.u16();
  auto token = r.str();  // later versions may append fields: not checked for trailing bytes
  if (version != sw::kVersion) {
    spdlog::warn("store: rejecting client {}: it speaks store protocol v{}, this server v{}",
                 c.peer, version, sw::kVersion);
    reply(c, error_frame(f.id, sw::ErrorCode::version_mismatch,
                         "the store speaks protocol version " + std::to_string(sw::kVersion) +
                             ", the client " + std::to_string(version)));
  } else if (token != opts_.token) {
    spdlog::warn("store: rejecting client {}: wrong job token (a rank of another job?)", c.peer);
    reply(c, error_frame(f.id, sw::ErrorCode::token_mismatch,
                         "this store belongs to another job (token mismatch)"));
  } else {
    c.greeted = true;
    reply(c, sw::Writer(sw::Type::hello_ok, f.id).u16(sw::kVersion).finish());
    return;
  }
  ++dropped_;
  c.closing = true;
  flush(c);
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
      auto sum = state_.add(key, delta, woken);
      reply(c, sum ? sw::Writer(sw::Type::integer, f.id).i64(*sum).finish()
                   : error_frame(f.id, sw::ErrorCode::not_an_integer,
                                 "the value of key '" + key + "' is not an integer"));
      break;
    }
    case sw::Type::wait: {
      auto keys = r.strs();
      r.expect_done();
      park(c, f.id, keys, false);
      break;
    }
    case sw::Type::multi_get: {
      auto keys = r.strs();
      r.expect_done();
      sw::Writer w(sw::Type::values, f.id);
      w.u32(static_cast<std::uint32_t>(keys.size()));
      for (const auto& k : keys) {
        auto* v = state_.find(k);
        w.u8(v ? 1 : 0).str(v ? *v : std::string());
      }
      reply(c, std::move(w).finish());
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
  auto wid = next_waiter_++;
  if (state_.park(wid, keys)) {
    reply(c, is_get ? sw::Writer(sw::Type::value, req).str(*state_.find(keys[0])).finish()
                    : sw::Writer(sw::Type::ok, req).finish());
    return;
  }
  pending_.emplace(wid, Pending{c.id, req, is_get, is_get ? keys[0] : std::string()});
  c.parked.insert(wid);
}

void ServerCore::cancel(Conn& c, std::uint32_t req) {
  for (auto wid : c.parked) {
    auto it = pending_.find(wid);
    if (it == pending_.end() || it->second.req != req) continue;
    state_.cancel(wid);
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
    reply(*c, p.is_get ? sw::Writer(sw::Type::value, p.req).str(*state_.find(p.key)).finish()
                       : sw::Writer(sw::Type::ok, p.req).finish());
  }
}

void ServerCore::reply(Conn& c, std::string frame) {
  if (c.doomed) return;
  c.out.append(frame);
  flush(c);
  if (!c.doomed && c.pending_out() > opts_.max_pending_output)
    condemn(c, "it does not read its replies (" + std::to_string(c.pending_out()) +
                   " bytes queued, limit " + std::to_string(opts_.max_pending_output) + ")");
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
    c.out.clear();
    c.out_off = 0;
    if (c.writing) set_events(c.fd.get(), c.id, EPOLLIN | EPOLLRDHUP);
    c.writing = false;
    if (c.closing && !c.doomed) {
      c.doomed = true;
      doomed_.push_back(c.id);
    }
    return;
  }
  if (c.out_off > (1u << 20)) {
    c.out.erase(0, c.out_off);
    c.out_off = 0;
  }
  if (!c.writing) set_events(c.fd.get(), c.id, EPOLLIN | EPOLLRDHUP | EPOLLOUT);
  c.writing = true;
}

}  // namespace gpudiag
